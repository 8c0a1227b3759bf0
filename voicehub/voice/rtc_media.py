"""Audio between aiortc tracks and the PCM16 the rest of voicehub speaks.

Both ends of a WebRTC call use these: the server's transport and the synthetic caller.

- `paced_track(queue, ...)` is an outbound aiortc audio track fed by a `PlayoutQueue`: one
  20 ms frame per tick on the event loop's clock (silence when nothing is queued, so the
  far end's jitter buffer keeps running), reporting marks as they fall due.
- `PcmDecoder` turns received frames (Opus decodes to 48 kHz stereo; G.711 to 8 kHz mono)
  into PCM16 mono at the rate the caller of it wants.

aiortc is imported lazily: without the `webrtc` extra nothing here loads it.
"""

from __future__ import annotations

import asyncio
import fractions
from collections.abc import Callable
from typing import Any

import numpy as np

from voicehub.errors import VoicehubError
from voicehub.voice.audio import FRAME_MS, Resampler, int16_to_pcm16
from voicehub.voice.audio.playout import PlayoutQueue

__all__ = ["PcmDecoder", "import_aiortc", "paced_track"]

_MAX_LATE = 0.5  # seconds behind schedule before the pacer gives up catching up


def import_aiortc() -> Any:
    """The aiortc module, or a clear error naming the extra to install."""
    try:
        import aiortc
    except ImportError:
        raise VoicehubError("WebRTC calls need aiortc: pip install 'voicehub[webrtc]'") from None
    return aiortc


def paced_track(
    queue: PlayoutQueue,
    *,
    on_marks: Callable[[tuple[str, ...]], None],
    on_audio: Callable[[], None] | None = None,
) -> Any:
    """An aiortc `MediaStreamTrack` (kind "audio") playing `queue` in real time.

    `on_marks` gets the marks whose audio has just been handed to the encoder; `on_audio`
    is called for each frame that carried queued audio (not silence).
    """
    import av

    aiortc = import_aiortc()
    rate = queue.sample_rate
    samples = rate * FRAME_MS // 1000
    time_base = fractions.Fraction(1, rate)
    silence = bytes(queue.frame_bytes)

    track_base: Any = aiortc.MediaStreamTrack

    class PacedTrack(track_base):  # type: ignore[misc]
        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._pts = 0
            self._next_at: float | None = None

        async def recv(self) -> Any:
            if self.readyState != "live":
                raise aiortc.mediastreams.MediaStreamError
            loop = asyncio.get_running_loop()
            if self._next_at is None:
                self._next_at = loop.time()
            delay = self._next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -_MAX_LATE:  # the loop stalled: resume the clock, do not burst
                self._next_at = loop.time()
            self._next_at += FRAME_MS / 1000
            tick = queue.tick()
            if tick.marks:
                on_marks(tick.marks)
            if tick.audio is not None and on_audio is not None:
                on_audio()
            frame = av.AudioFrame(format="s16", layout="mono", samples=samples)
            frame.planes[0].update(tick.audio if tick.audio is not None else silence)
            frame.sample_rate = rate
            frame.pts = self._pts
            frame.time_base = time_base
            self._pts += samples
            return frame

    return PacedTrack()


class PcmDecoder:
    """Received audio frames -> PCM16 mono at `rate` (streaming: keeps resampler state)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._resampler: Resampler | None = None
        self._from_rate = 0

    def decode(self, frame: Any) -> bytes:
        """One av `AudioFrame` (packed s16, any rate and channel count) as PCM16 bytes."""
        if frame.format.name != "s16":
            raise ValueError(f"expected s16 audio frames, got {frame.format.name}")
        channels = len(frame.layout.channels)
        samples = frame.to_ndarray().reshape(-1, channels)
        if channels == 1:
            mono = samples[:, 0].astype(np.int16)
        else:  # integer sum: several times cheaper than a float mean per frame
            mono = (samples.astype(np.int32).sum(axis=1) // channels).astype(np.int16)
        if frame.sample_rate == self.rate:
            return int16_to_pcm16(mono)
        if self._resampler is None or frame.sample_rate != self._from_rate:
            self._resampler = Resampler(frame.sample_rate, self.rate)
            self._from_rate = frame.sample_rate
        return int16_to_pcm16(self._resampler.push(mono))
