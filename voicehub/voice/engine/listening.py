"""The caller's audio into the VAD and the recognizer, and their events back out.

`CallerAudio` cuts caller PCM16 into 20 ms frames and hands each, as an `rtc.AudioFrame`, to
the VAD stream and the recognizer stream (livekit's public `push_frame`), after measuring its
speech evidence (`SpeechEvidence`, for the delivery's per-frame yield and the agent's pause
for the caller). It keeps the last seconds of the caller's audio for the end-of-turn model.

A call's intake filter (noise suppression, `voicehub.voice.denoise`) feeds turn-taking only:
the evidence, the kept audio and the VAD hear the filtered frame, the recognizer the frame as
sent. Noise then neither takes the floor nor holds a result back, and the words are
recognized from the audio the recognizer was trained on (RNNoise trims the talker on 8 kHz
lines and cost the words accuracy in noise: docs/noise.md). The filter's delay (about 12 ms)
puts the VAD that much behind the recognizer, well inside the recognizer's pre-roll.

`follow_events` reads a provider stream's events: through `DirectEvents.deliver_to` when the
stream offers it (our providers: no task wake-up per event), else with a task iterating the
stream, as any livekit consumer does. A sink that wants speech boundaries only gets only
those from a stream that can leave the rest out (`BoundaryEvents`). A stream that ends with
an error is reported to `on_error`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from voicehub.voice.audio import FrameSplitter, frame_bytes, resample
from voicehub.voice.denoise import FrameFilter
from voicehub.voice.engine.direct_events import BoundaryEvents, DirectEvents
from voicehub.voice.providers import vendor_import
from voicehub.voice.speech_evidence import SpeechEvidence

with vendor_import("livekit-agents"):
    from livekit import rtc

__all__ = ["CallerAudio", "follow_events"]

log = logging.getLogger("voicehub.voice")

E = TypeVar("E")

MODEL_RATE = 16000  # what the end-of-turn model listens at


class CallerAudio:
    """One call's caller audio (see the module docstring).

    `on_voiced` is called for every speech-like frame; `keep_seconds` of audio are kept for
    `recent_audio` (0 keeps none). `intake`, when given, filters every frame the evidence, the
    kept audio and the VAD hear; the recognizer hears the caller's frames unfiltered.
    """

    def __init__(
        self,
        sample_rate: int,
        on_voiced: Callable[[], None],
        *,
        keep_seconds: float = 0.0,
        intake: FrameFilter | None = None,
    ) -> None:
        self.sample_rate = sample_rate
        self.intake = intake
        self._frame = frame_bytes(sample_rate)
        self._samples = self._frame // 2
        self._splitter = FrameSplitter(sample_rate)
        self._evidence = SpeechEvidence(sample_rate)
        self._on_voiced = on_voiced
        self._vad: Any = None  # the livekit VAD stream, fed the intake's frames
        self._recognizer: Any = None  # the livekit STT stream, fed the frames as sent
        self.frames = 0
        keep = int(keep_seconds * 1000 / 20)
        self._recent: collections.deque[bytes] | None = (
            collections.deque(maxlen=keep) if keep else None
        )

    def feed(self, vad: Any, recognizer: Any) -> None:
        """From now on, every frame goes to the `vad` stream (filtered by the intake) and
        then to the `recognizer` stream (as sent), through livekit's `push_frame`."""
        self._vad, self._recognizer = vad, recognizer

    @property
    def seconds(self) -> float:
        """Caller audio pushed so far."""
        return self.frames * 0.02

    def push(self, pcm16: bytes) -> None:
        """Caller PCM16 at `sample_rate`, any whole number of samples."""
        if len(pcm16) == self._frame and not self._splitter.pending:
            self._push_frame(pcm16)
            return
        for chunk in self._splitter.push(pcm16):
            self._push_frame(chunk)

    def recent_audio(self) -> npt.NDArray[np.float32]:
        """The kept audio at 16 kHz, float32 in [-1, 1], oldest first."""
        if not self._recent:
            return np.zeros(0, dtype=np.float32)
        samples = np.frombuffer(b"".join(self._recent), dtype="<i2")
        if self.sample_rate != MODEL_RATE:
            samples = resample(samples, self.sample_rate, MODEL_RATE)
        return (samples.astype(np.float32) / 32768.0).astype(np.float32)

    def close(self) -> None:
        """Free the intake filter (the call ended)."""
        if self.intake is not None:
            self.intake.close()

    def _push_frame(self, pcm16: bytes) -> None:
        self.frames += 1
        heard = pcm16 if self.intake is None else self.intake.process(pcm16)
        if self._evidence.voiced_frames(heard):
            self._on_voiced()
        if self._recent is not None:
            self._recent.append(heard)
        frame = rtc.AudioFrame(heard, self.sample_rate, 1, self._samples)
        self._push_to(self._vad, frame)
        if heard is not pcm16:
            frame = rtc.AudioFrame(pcm16, self.sample_rate, 1, self._samples)
        self._push_to(self._recognizer, frame)

    @staticmethod
    def _push_to(stream: Any, frame: rtc.AudioFrame) -> None:
        if stream is None:
            return
        try:
            stream.push_frame(frame)
        except RuntimeError:  # the stream ended (closing, or failed): nothing to feed
            log.debug("caller frame after %s ended", type(stream).__name__)


def follow_events(
    stream: Any,
    sink: Callable[[E], None],
    on_error: Callable[[BaseException], None],
    name: str,
    *,
    boundaries_only: bool = False,
) -> asyncio.Task[None] | None:
    """Hand `stream`'s events to `sink`: directly when it offers `DirectEvents` (returns
    None), else from a task iterating it (returned; cancel it to stop). `boundaries_only`:
    `sink` reads a VAD's speech boundaries only, and a `BoundaryEvents` stream sends no
    others (it may still get the rest from a stream that cannot leave them out)."""
    if boundaries_only and isinstance(stream, BoundaryEvents):
        stream.deliver_to(sink, inferences="none")
        return None
    if isinstance(stream, DirectEvents):
        stream.deliver_to(sink)
        return None

    async def read() -> None:
        try:
            async for event in stream:
                try:
                    sink(event)
                except Exception:
                    log.exception("%s event handler failed", name)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            on_error(error)

    return asyncio.get_running_loop().create_task(read(), name=f"voicehub-{name}-events")
