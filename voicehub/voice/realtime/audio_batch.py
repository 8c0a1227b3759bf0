"""Caller audio to the model in batches: one `input_audio_buffer.append` per `batch_ms`.

Each append is a WebSocket message: a JSON frame, a base64 encoding, a send through the
SDK and a syscall, whatever its size, and at one per 20 ms frame it was most of the relay's
cost. 60 ms batches cut that threefold, and resample and encode 60 ms at a time. Why 60:
the server VAD counts audio, not wall time, so a batch only delays what it decides by the
audio still waiting here: at most 40 ms at 60 ms (the start of a barge-in, say); 100 ms
would hold back up to 80 ms for little more: in the relay benchmark (40 calls, interleaved
runs) 20 ms appends cost about 112 us per frame, 60 ms about 90, 100 ms about 87.

The end of the caller's speech is not held back at all: while the model hears the caller
(between its `speech_started` and `speech_stopped`), a quiet frame flushes the batch at
once, so the silence that ends the turn reaches the server as it happens. Control events
flush first as well (`flush`), so audio and commits keep their order.
"""

from __future__ import annotations

import numpy as np

from voicehub.voice.realtime.config import MODEL_RATE
from voicehub.voice.realtime.resample import PcmResampler

__all__ = ["BATCH_MS", "QUIET_PEAK", "AudioBatcher"]

BATCH_MS = 60
QUIET_PEAK = 1000
"""A frame whose loudest sample is under this (about -30 dBFS) is a pause, not speech."""


class AudioBatcher:
    """PCM16 frames at the transport rate in, model-rate PCM16 batches out."""

    def __init__(self, from_rate: int, batch_ms: int = BATCH_MS) -> None:
        self.batch_bytes = from_rate * 2 * batch_ms // 1000
        self.in_turn = False  # the model hears the caller speaking: flush at pauses
        self._resampler = PcmResampler(from_rate, MODEL_RATE)
        self._pending = bytearray()

    def push(self, pcm16: bytes) -> bytes | None:
        """Add one frame; the batch to send when it is full (or at a pause in a turn)."""
        self._pending += pcm16
        if len(self._pending) >= self.batch_bytes or (self.in_turn and _quiet(pcm16)):
            return self.flush()
        return None

    def flush(self) -> bytes:
        """Everything waiting, resampled (may be empty)."""
        if not self._pending:
            return b""
        batch = self._resampler.push(bytes(self._pending))
        self._pending.clear()
        return batch

    def reset(self) -> None:
        """Drop what waits (the connection it was for is gone)."""
        self._pending.clear()
        self.in_turn = False


def _quiet(pcm16: bytes) -> bool:
    samples = np.frombuffer(pcm16, dtype=np.int16)
    return not len(samples) or max(int(samples.max()), -int(samples.min())) < QUIET_PEAK
