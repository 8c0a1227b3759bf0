"""Streaming PCM16 resampling for the relay (transport rate <-> the model's 24 kHz).

soxr (native) when installed; else voicehub's own polyphase `Resampler` (numpy, about ten
times slower), so the relay still works without the extra. soxr runs at its high quality by
default: at a 20-100 ms chunk its lower qualities cost hardly less, and roll off wider.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voicehub.errors import ProtocolError
from voicehub.voice.audio import Resampler, int16_to_pcm16, pcm16_to_int16

__all__ = ["SOXR_QUALITY", "PcmResampler"]

SOXR_QUALITY = "HQ"


class PcmResampler:
    """PCM16 mono bytes in, PCM16 bytes out, at a fixed pair of rates. `quality` is soxr's
    ("HQ", "MQ", "LQ"): the higher, the longer its delay (48 -> 16 kHz: 21, 15, 6 ms)."""

    def __init__(self, from_rate: int, to_rate: int, quality: str = SOXR_QUALITY) -> None:
        self.passthrough = from_rate == to_rate
        self._soxr: Any = None
        self._numpy: Resampler | None = None
        if self.passthrough:
            return
        try:
            import soxr

            self._soxr = soxr.ResampleStream(from_rate, to_rate, 1, dtype="int16", quality=quality)
        except ImportError:
            self._numpy = Resampler(from_rate, to_rate)

    def push(self, pcm16: bytes | bytearray | memoryview) -> bytes:
        """Resample one chunk (read, never kept: a bytearray may be reused at once); the
        output may lag the input by a few samples."""
        if self.passthrough:
            return bytes(pcm16)
        if self._soxr is not None:
            if len(pcm16) % 2:
                raise ProtocolError(f"PCM16 chunk has {len(pcm16)} bytes: expected an even number")
            # a read-only view, not a copy: soxr only reads it (one allocation less per chunk);
            # as one column, soxr's own shape (its 1-D path adds an axis and squeezes it away)
            view = np.frombuffer(pcm16, dtype="<i2").reshape(-1, 1)
            out: bytes = self._soxr.resample_chunk(view).tobytes()
            return out
        assert self._numpy is not None
        return int16_to_pcm16(self._numpy.push(pcm16_to_int16(pcm16)))
