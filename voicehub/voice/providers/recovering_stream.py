"""One call's recognizer stream that outlives the provider streams behind it.

A livekit recognizer stream that fails (its connection or its engine broke beyond the
plugin's own retries) is over: its events end with the error, or, for a stream that hands
its events to a callback, it only refuses the next frame (`push_frame` raises
RuntimeError). Left so, the caller is never heard again for the rest of the call.
`RecoveringRecognizeStream` opens a new stream of the same recognizer instead: at once
after a stream that lived, then after a delay doubling from `FIRST_DELAY` up to
`MAX_DELAY` on the call's clock while new ones keep failing (a stream that lives
`STEADY_AFTER` seconds starts the count again). The audio meanwhile is not heard; each
final the failed stream owed is answered empty, so the turn it belonged to ends unheard
rather than waiting for a final that will never come.

A stream that goes quiet is over too: one that has owed a final for `QUIET_LIMIT` seconds
with no event at all (a socket that stopped answering without closing, a decoder that
hung) is replaced as a failed one is. The engine has given up on that final by then
(`recognizer_wait_limit`, 15 s); without this, every turn after it would be unheard.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from voicehub.core.clock import Clock
from voicehub.voice.engine.direct_events import DirectEvents
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.streams import recognizer_abilities

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt as lk_stt
    from livekit.agents.language import LanguageCode

__all__ = ["FIRST_DELAY", "MAX_DELAY", "QUIET_LIMIT", "STEADY_AFTER", "RecoveringRecognizeStream"]

log = logging.getLogger("voicehub.voice")

FIRST_DELAY = 0.5
MAX_DELAY = 10.0
STEADY_AFTER = 30.0
QUIET_LIMIT = 20.0  # seconds owing a final with no event before a stream counts as dead
_CHECK_EVERY = 50  # frames (1 s of 20 ms frames) between looks at a quiet stream

Sink = Callable[[lk_stt.SpeechEvent], None]


class RecoveringRecognizeStream:
    """A recognizer stream for the engine, made of `open_stream()`'s streams one after
    another (see the module). `DirectEvents`: the engine hands it its sink."""

    def __init__(self, open_stream: Callable[[], Any], clock: Clock) -> None:
        self._open, self._clock = open_stream, clock
        self._stream: Any = open_stream()
        self._opened_at = clock.now()
        self._sink: Sink | None = None
        self._reader: asyncio.Task[None] | None = None
        self._reopening: asyncio.Task[None] | None = None
        self._failures = 0  # in a row, without a stream that lived
        self._owing_since: float | None = None  # owed a final, with no event since
        self._frames = 0
        self._closed = False
        self.reopened = 0  # new streams opened after a failure

    @property
    def stream(self) -> Any:
        """The provider stream heard now (None while a new one is awaited)."""
        return self._stream

    # -- the engine's side ------------------------------------------------------------------

    def deliver_to(self, sink: Sink) -> None:
        self._sink = sink
        if self._stream is not None:
            self._follow(self._stream)

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        stream = self._stream
        if stream is None:
            return  # between streams: this audio is not heard
        try:
            stream.push_frame(frame)
        except RuntimeError as error:  # it ended: failed (or closing, then we are too)
            self._failed(stream, error)
            return
        self._frames += 1
        if self._frames % _CHECK_EVERY == 0:
            self._check_quiet(stream)

    def flush(self) -> None:
        self._each(lambda abilities: abilities.flush())

    def flush_ended(self, behind: float) -> None:
        self._each(lambda abilities: abilities.flush_ended(behind))

    def speech_started(self) -> None:
        self._each(lambda abilities: abilities.speech_started())

    def end_input(self) -> None:
        if self._stream is not None:
            with contextlib.suppress(RuntimeError):
                self._stream.end_input()

    @property
    def finals_owed(self) -> int:
        if self._stream is None:
            return 0
        return recognizer_abilities(self._stream).finals_owed

    async def aclose(self) -> None:
        self._closed = True
        for task in (self._reader, self._reopening):
            if task is not None:
                task.cancel()
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()

    # -- internals --------------------------------------------------------------------------

    def _each(self, call: Callable[[Any], None]) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            call(recognizer_abilities(stream))
        except RuntimeError as error:
            self._failed(stream, error)

    def _check_quiet(self, stream: Any) -> None:
        owed = recognizer_abilities(stream).finals_owed
        now = self._clock.now()
        if owed <= 0:
            self._owing_since = None
        elif self._owing_since is None:
            self._owing_since = now
        elif now - self._owing_since >= QUIET_LIMIT:
            quiet = now - self._owing_since
            self._failed(stream, TimeoutError(f"no event for {quiet:.0f} s, owing {owed} final(s)"))

    def _follow(self, stream: Any) -> None:
        def take(event: lk_stt.SpeechEvent) -> None:
            if stream is self._stream and self._sink is not None:
                self._owing_since = None  # it is alive
                self._sink(event)

        if isinstance(stream, DirectEvents):
            stream.deliver_to(take)
            return

        async def read() -> None:
            try:
                async for event in stream:
                    take(event)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._failed(stream, error)

        self._reader = asyncio.get_running_loop().create_task(read(), name="voicehub-stt-events")

    def _failed(self, stream: Any, error: BaseException) -> None:
        if self._closed or stream is not self._stream:
            return
        owed = recognizer_abilities(stream).finals_owed
        self._stream, self._owing_since = None, None
        lived = self._clock.now() - self._opened_at
        self._failures = 1 if lived >= STEADY_AFTER else self._failures + 1
        delay = (
            0.0 if self._failures == 1 else min(FIRST_DELAY * 2 ** (self._failures - 2), MAX_DELAY)
        )
        log.warning(
            "the recognizer stream failed (%s: %s); %d utterance(s) unheard; a new one in %g s",
            type(error).__name__, error, owed, delay,
        )  # fmt: skip
        if self._sink is not None:
            for _ in range(owed):
                self._sink(_empty_final())
        self._reopening = asyncio.get_running_loop().create_task(
            self._reopen(stream, delay), name="voicehub-stt-reopen"
        )

    async def _reopen(self, failed: Any, delay: float) -> None:
        with contextlib.suppress(Exception):
            await failed.aclose()
        if delay:
            await self._clock.sleep(delay)
        if self._closed:
            return
        try:
            stream = self._open()
        except Exception as error:
            log.warning("opening a new recognizer stream failed: %s", error)
            self._failures += 1
            self._reopening = asyncio.get_running_loop().create_task(
                self._reopen(None, min(FIRST_DELAY * 2**self._failures, MAX_DELAY))
            )
            return
        self._stream, self._opened_at = stream, self._clock.now()
        self.reopened += 1
        if self._sink is not None:
            self._follow(stream)


def _empty_final() -> lk_stt.SpeechEvent:
    return lk_stt.SpeechEvent(
        type=lk_stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[lk_stt.SpeechData(language=LanguageCode("en"), text="")],
    )
