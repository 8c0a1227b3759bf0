"""A call's recognizer and voice wrapped so that a bench can make them fail mid-call, from
outside the server process (`voicehub_dev.fakes.faulty_serve`), through a control file:

    {"stt_raise": n}     each recognizer stream open now fails at its next frame (its
                         events end with an error), once per new `n`, as a plugin's whose
                         connection or engine broke beyond its own retries; streams opened
                         later do not
    {"stt": "hang"}      the recognizer answers nothing (audio goes in, no transcript comes
                         out) until the file says otherwise; what it held comes out then
    {"stt": "lost"}      each recognizer stream that hears something meanwhile answers
                         nothing more for good (it owes the finals), as a socket that
                         stopped answering without closing; streams opened later answer
    {"tts": "raise"}     every synthesis started meanwhile raises
    {"tts": "hang"}      every synthesis started meanwhile sends no audio until the file
                         says otherwise
    {"tts": "lost"}      every synthesis started meanwhile never sends audio (a request
                         lost on its way: only a synthesis started later answers)
    {"stall": [n, s]}    the event loop is blocked `s` seconds (once per new `n`)

Anything the file does not name runs as the wrapped provider does. The wrappers are
livekit plugins to the engine (`stt.STT` / `tts.TTS` shapes: `capabilities`, `stream`,
`synthesize`, `on`/`off`), and hand every other attribute to the provider they wrap.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any

from voicehub.voice.engine.direct_events import DirectEvents
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.streams import recognizer_abilities

with vendor_import("livekit-agents"):
    from livekit.agents import APIConnectionError

__all__ = ["FaultControl", "FaultySTT", "FaultyTTS", "faulty_tts"]

log = logging.getLogger("voicehub_dev.faults")

POLL_SECONDS = 0.05


class FaultControl:
    """What the control file says now (read every `POLL_SECONDS` by `watch`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.state: dict[str, Any] = {}
        self._changed = asyncio.Event()
        self._version: tuple[int, int] = (0, 0)
        self._stalls_done: set[int] = set()

    def mode(self, provider: str) -> str:
        return str(self.state.get(provider, "ok"))

    async def until_not(self, provider: str, mode: str) -> None:
        """Until `provider`'s mode is no longer `mode`."""
        while self.mode(provider) == mode:
            self._changed.clear()
            await self._changed.wait()

    def read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            status = self.path.stat()
            version = (status.st_ino, status.st_mtime_ns)  # each write replaces the file
            if version == self._version:
                return
            self._version = version
            self.state = json.loads(self.path.read_text() or "{}")
            self._changed.set()
            log.warning("faults now: %s", self.state)
        stall = self.state.get("stall")
        if stall and int(stall[0]) not in self._stalls_done:
            self._stalls_done.add(int(stall[0]))
            log.warning("stalling the event loop %s s", stall[1])
            time.sleep(float(stall[1]))  # blocks the loop: the fault itself

    async def watch(self) -> None:
        while True:
            self.read()
            await asyncio.sleep(POLL_SECONDS)


class FaultySTT:
    """A livekit STT whose streams fail or hang as `control` says."""

    def __init__(self, inner: Any, control: FaultControl) -> None:
        self.inner, self.control = inner, control

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    def on(self, event: str, handler: Callable[..., Any]) -> Any:
        return self.inner.on(event, handler)

    def off(self, event: str, handler: Callable[..., Any]) -> Any:
        return self.inner.off(event, handler)

    def stream(self, **options: Any) -> FaultyRecognizeStream:
        return FaultyRecognizeStream(self.inner.stream(**options), self.control)


class FaultyRecognizeStream:
    """The wrapped stream's events, read as a livekit stream is (iterated); they end with
    an error once the recognizer is told to raise, and are held while it hangs."""

    def __init__(self, inner: Any, control: FaultControl) -> None:
        self.inner, self.control = inner, control
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._held: list[Any] = []
        self._failed = False
        self._lost = False  # answers nothing more, for good
        self._raise_seen = control.state.get("stt_raise")  # fails on a newer order only
        self._reader: asyncio.Task[None] | None = None
        self._releaser: asyncio.Task[None] | None = None
        if isinstance(inner, DirectEvents):
            inner.deliver_to(self._take)
        else:
            self._reader = asyncio.get_running_loop().create_task(self._read())

    @property
    def finals_owed(self) -> int:
        held = sum(_is_final(event) for event in self._held)
        return recognizer_abilities(self.inner).finals_owed + held

    def speech_started(self) -> None:
        recognizer_abilities(self.inner).speech_started()

    def flush_ended(self, behind: float) -> None:
        recognizer_abilities(self.inner).flush_ended(behind)

    def push_frame(self, frame: Any) -> None:
        if self._failed:
            raise RuntimeError("the recognizer stream failed")
        order = self.control.state.get("stt_raise")
        if order is not None and order != self._raise_seen:
            self._failed = True
            self._events.put_nowait(APIConnectionError("recognizer fault injected"))
            raise RuntimeError("the recognizer stream failed")
        self.inner.push_frame(frame)

    def flush(self) -> None:
        if not self._failed:
            self.inner.flush()

    def end_input(self) -> None:
        if not self._failed:
            self.inner.end_input()

    def __aiter__(self) -> FaultyRecognizeStream:
        return self

    async def __anext__(self) -> Any:
        event = await self._events.get()
        if event is None:
            raise StopAsyncIteration
        if isinstance(event, BaseException):
            raise event
        return event

    async def aclose(self) -> None:
        for task in (self._reader, self._releaser):
            if task is not None:
                task.cancel()
        self._events.put_nowait(None)
        with contextlib.suppress(Exception):
            await self.inner.aclose()

    def _take(self, event: Any) -> None:
        if self._failed:
            return
        self._lost = self._lost or self.control.mode("stt") == "lost"
        if self._lost:
            self._held.append(event)  # never released
            return
        if self.control.mode("stt") == "hang":
            self._held.append(event)
            if self._releaser is None or self._releaser.done():
                self._releaser = asyncio.get_running_loop().create_task(self._release())
            return
        self._events.put_nowait(event)

    async def _release(self) -> None:
        await self.control.until_not("stt", "hang")
        held, self._held = self._held, []
        for event in held:
            self._events.put_nowait(event)

    async def _read(self) -> None:
        try:
            async for event in self.inner:
                self._take(event)
        except Exception as error:
            self._events.put_nowait(error)
        self._events.put_nowait(None)


def _is_final(event: Any) -> bool:
    return "FINAL" in str(getattr(event, "type", "")).upper()


class FaultyTTS:
    """A livekit TTS whose syntheses raise or hang as `control` says."""

    def __init__(self, inner: Any, control: FaultControl) -> None:
        self.inner, self.control = inner, control

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    @property
    def sample_rate(self) -> int:
        return int(self.inner.sample_rate)

    def on(self, event: str, handler: Callable[..., Any]) -> Any:
        return self.inner.on(event, handler)

    def off(self, event: str, handler: Callable[..., Any]) -> Any:
        return self.inner.off(event, handler)

    async def fault(self) -> None:
        """Raise or wait, as the control file says for the voice now."""
        mode = self.control.mode("tts")
        if mode == "raise":
            raise APIConnectionError("voice fault injected")
        if mode == "hang":
            await self.control.until_not("tts", "hang")
        if mode == "lost":
            await asyncio.Event().wait()  # never set: this synthesis is gone for good

    def synthesize(self, text: str, **options: Any) -> Any:
        return _FaultyChunked(self, self.inner.synthesize(text, **options))

    def stream(self, **options: Any) -> Any:
        if self.control.mode("tts") != "ok":
            raise APIConnectionError("voice fault injected")
        return self.inner.stream(**options)


class FaultyPcmTTS(FaultyTTS):
    """`FaultyTTS` for a TTS that speaks PCM itself (`PcmSpeaker`: Deepgram's)."""

    async def speak_pcm(self, texts: AsyncIterator[str]) -> AsyncGenerator[bytes, None]:
        await self.fault()
        spoken = self.inner.speak_pcm(texts)
        try:
            async for chunk in spoken:
                yield chunk
        finally:
            await spoken.aclose()


def faulty_tts(inner: Any, control: FaultControl) -> FaultyTTS:
    """`inner` wrapped, a `PcmSpeaker` still when it is one."""
    if hasattr(inner, "speak_pcm"):
        return FaultyPcmTTS(inner, control)
    return FaultyTTS(inner, control)


class _FaultyChunked:
    """A `synthesize()` stream that meets the fault before its first chunk."""

    def __init__(self, owner: FaultyTTS, inner: Any) -> None:
        self.owner, self.inner = owner, inner
        self._checked = False

    async def __aenter__(self) -> _FaultyChunked:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.__aexit__(*exc)

    def __aiter__(self) -> _FaultyChunked:
        return self

    async def __anext__(self) -> Any:
        if not self._checked:
            self._checked = True
            await self.owner.fault()
        return await self.inner.__anext__()

    async def aclose(self) -> None:
        await self.inner.aclose()
