"""A recognizer that hears whole utterances only (livekit STT without streaming: Whisper), as
a stream the engine flushes at the end of each utterance.

livekit wraps such an STT in `stt.StreamAdapter`, which runs a VAD of its own to cut the
audio: a second VAD on every frame of every call. The engine already knows where the caller's
speech starts (the VAD) and ends (it flushes), so `UtteranceStream` only keeps the caller's
audio: trimmed to a short pre-roll when speech starts (`speech_started`), recognized with the
STT's public `recognize()` at each `flush()` (one at a time, in order), and handed to the
engine as a final transcript (`DirectEvents`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt as lk_stt
    from livekit.agents.language import LanguageCode

__all__ = ["UtteranceStream", "finalizes_on_flush", "recognizer_stream"]

log = logging.getLogger("voicehub.voice")

_ENGLISH = LanguageCode("en")


def recognizer_stream(stt: Any) -> Any:
    """A stream of `stt` for the engine: its own when it streams, else an `UtteranceStream`."""
    if stt.capabilities.streaming:
        return stt.stream()
    return UtteranceStream(stt)


def finalizes_on_flush(stt: Any) -> bool:
    """Whether a flush of `stt`'s engine stream brings a final (the engine waits for it)."""
    capabilities: lk_stt.STTCapabilities = stt.capabilities
    return capabilities.manual_flush or not capabilities.streaming


class UtteranceStream:
    """Audio kept per utterance, recognized at each flush (see the module docstring).

    `keep_seconds` bounds the audio kept (a caller talking without pause); `preroll` is the
    audio kept from before the VAD heard speech start (its first phoneme).
    """

    def __init__(self, stt: Any, *, keep_seconds: float = 30.0, preroll: float = 0.4) -> None:
        self._stt = stt
        self._frames: collections.deque[rtc.AudioFrame] = collections.deque()
        self._seconds = 0.0
        self._keep, self._preroll = keep_seconds, preroll
        self._sink: Callable[[lk_stt.SpeechEvent], None] | None = None
        self._jobs: asyncio.Queue[list[rtc.AudioFrame] | None] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._closed = False
        self.finals_owed = 0  # flushes whose final has not been sent yet

    def deliver_to(self, sink: Callable[[lk_stt.SpeechEvent], None]) -> None:
        """`DirectEvents`: finals go to `sink`."""
        self._sink = sink
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._recognize_in_order())

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        if self._closed:
            raise RuntimeError("UtteranceStream is closed")
        self._frames.append(frame)
        self._seconds += frame.duration
        while self._seconds > self._keep and len(self._frames) > 1:
            self._seconds -= self._frames.popleft().duration

    def speech_started(self) -> None:
        """The VAD heard speech start: keep only the pre-roll before it."""
        while self._frames and self._seconds - self._frames[0].duration >= self._preroll - 1e-6:
            self._seconds -= self._frames.popleft().duration

    def flush(self) -> None:
        """The utterance ended: recognize what was kept (a final, possibly empty, follows)."""
        frames, self._frames, self._seconds = list(self._frames), collections.deque(), 0.0
        self.finals_owed += 1
        self._jobs.put_nowait(frames)

    def flush_ended(self, behind: float) -> None:
        """The utterance ended `behind` seconds before the latest audio: it is cut at the
        flush all the same (the engine's VAD already trimmed its start)."""
        self.flush()

    def end_input(self) -> None:
        self.flush()
        self._jobs.put_nowait(None)

    async def aclose(self) -> None:
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    async def _recognize_in_order(self) -> None:
        while (frames := await self._jobs.get()) is not None:
            text = ""
            if frames:
                try:
                    event = await self._stt.recognize(frames)
                    text = event.alternatives[0].text if event.alternatives else ""
                except Exception:
                    log.exception("recognizing an utterance failed; it counts as unheard")
            final = lk_stt.SpeechEvent(
                type=lk_stt.SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[lk_stt.SpeechData(language=_ENGLISH, text=text)],
            )
            self.finals_owed -= 1
            if self._sink is not None:
                self._sink(final)
