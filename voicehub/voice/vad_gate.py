"""Keep a call's STT from running ahead of its VAD when caller audio arrives in bursts.

livekit hands every caller frame to the VAD and to the STT at once. Paced audio keeps the
two in step; a burst (a client sending faster than real time, network jitter, Twilio
catching up) does not: PocketSphinx decodes a burst inline in milliseconds while Silero
hops to a thread per 32 ms window, so the STT's final (its own 1 s endpoint) can come before
the VAD has even seen the speech start. livekit then commits the turn on the final, the
late VAD start of the *same* utterance interrupts the reply, and the caller hears nothing
(`voicehub call --fast` lost 1 call in 4 that way).

:class:`VadProgress` counts the caller audio the VAD has analysed; the call's audio input
(`CallerAudioInput`) releases a frame only while the released audio is at most `lookahead`
seconds ahead of it. Paced audio never waits (the VAD keeps up); a burst is consumed in
audio order, as fast as the VAD goes, and nothing is dropped. :class:`GatedVAD` wraps the
call's VAD so its streams report their progress.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import vad

__all__ = ["GatedVAD", "VadProgress"]

log = logging.getLogger("voicehub.voice")

# s: above what batched Silero holds back when keeping up (a window of 32 ms, a frame, a
# 20 ms tick and the thread hop), with room for a loaded loop's late wake-ups (at 0.1 s, a
# loaded machine sent a frame in four through the queue; at 0.2 s, 250 paced calls on one
# loop were held back after its stalls, a full collection of 50-80 ms, and the held-back
# path's extra work tipped the loop over); far below any endpoint (the STT's is 1 s)
LOOKAHEAD = 0.3
STALL = 1.0  # s: a VAD that analyses nothing for this long (no stream, say) stops gating


class VadProgress:
    """Seconds of caller audio released to the session and analysed by its VAD."""

    def __init__(self, lookahead: float = LOOKAHEAD, stall: float = STALL) -> None:
        self.lookahead = lookahead
        self.stall = stall
        self.released = 0.0
        self.analysed = 0.0
        self.waits = 0  # frames that had to wait for the VAD (bursts)
        self._waiter: asyncio.Future[None] | None = None

    def ahead(self) -> bool:
        """Whether the next frame must wait for the VAD."""
        return self.released - self.analysed > self.lookahead

    async def wait(self) -> None:
        """Until the VAD catches up to within `lookahead`, or `stall` s pass without it
        analysing anything (then the gate opens: the session goes on ungated)."""
        loop = asyncio.get_running_loop()
        while self.ahead():
            self.waits += 1
            before = self.analysed
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(self.stall, _resolve, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if self.ahead() and self.analysed == before:
                log.warning("the VAD analysed nothing for %.1f s: caller audio passes", self.stall)
                self.resync()

    def advance(self, seconds: float) -> None:
        """The VAD analysed `seconds` more of the released audio."""
        self.analysed = min(self.analysed + seconds, self.released)
        if self._waiter is not None and not self.ahead():
            _resolve(self._waiter)

    def resync(self) -> None:
        """Count everything released as analysed (a new VAD stream, or a flush: the VAD
        starts a fresh segment and drops the partial window it held)."""
        self.analysed = self.released
        if self._waiter is not None:
            _resolve(self._waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@runtime_checkable
class ReportsAnalysed(Protocol):
    """A VAD stream that reports the seconds it analysed itself, as it decides them."""

    on_analysed: Callable[[float], None] | None


class GatedVAD(vad.VAD):
    """`inner`'s streams, reporting the audio they analysed to `progress`.

    The streams are `inner`'s own (same model, same decisions); their metrics are emitted
    on this object, which is the one the session subscribes to.
    """

    def __init__(self, inner: vad.VAD, progress: VadProgress) -> None:
        super().__init__(capabilities=inner.capabilities)
        self.inner = inner
        self.progress = progress
        self._label = inner._label

    @property
    def model(self) -> str:
        """The inner VAD's model."""
        return self.inner.model

    @property
    def provider(self) -> str:
        """The inner VAD's provider."""
        return self.inner.provider

    def stream(self) -> vad.VADStream:
        """A stream of `inner`'s whose analysed audio moves `progress` on."""
        stream = self.inner.stream()
        progress = self.progress
        progress.resync()  # a new stream knows nothing of the audio before it
        # livekit-agents (pinned) reads a stream's events through `_event_aiter` and emits
        # its metrics on `_vad`; neither has a public hook.
        stream._vad = self
        if isinstance(stream, ReportsAnalysed):  # batched Silero: reported as decided
            stream.on_analysed = progress.advance
        else:
            stream._event_aiter = _Counted(stream._event_aiter, progress)
        flush = stream.flush

        def flush_and_resync() -> None:
            flush()
            progress.resync()

        stream.flush = flush_and_resync  # type: ignore[method-assign]
        return stream


class _Counted:
    """A VAD event iterator that counts the audio of each inference."""

    __slots__ = ("_events", "_progress")

    def __init__(self, events: Any, progress: VadProgress) -> None:
        self._events = events
        self._progress = progress

    def __aiter__(self) -> _Counted:
        return self

    async def __anext__(self) -> vad.VADEvent:
        event: vad.VADEvent = await self._events.__anext__()
        if event.type is vad.VADEventType.INFERENCE_DONE:
            self._progress.advance(sum(frame.duration for frame in event.frames))
        return event
