"""Streaming PCM16 resampling for the relay (transport rate <-> the model's 24 kHz).

soxr (native, about 10 us per 20 ms frame) when installed; else voicehub's own polyphase
`Resampler` (numpy, about ten times slower), so the relay still works without the extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voicehub.errors import ProtocolError
from voicehub.voice.audio import Resampler, int16_to_pcm16, pcm16_to_int16

__all__ = ["PcmResampler"]


class PcmResampler:
    """PCM16 mono bytes in, PCM16 bytes out, at a fixed pair of rates."""

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self.passthrough = from_rate == to_rate
        self._soxr: Any = None
        self._numpy: Resampler | None = None
        if self.passthrough:
            return
        try:
            import soxr

            self._soxr = soxr.ResampleStream(from_rate, to_rate, 1, dtype="int16", quality="HQ")
        except ImportError:
            self._numpy = Resampler(from_rate, to_rate)

    def push(self, pcm16: bytes) -> bytes:
        """Resample one chunk; the output may lag the input by a few samples."""
        if self.passthrough:
            return pcm16
        if self._soxr is not None:
            if len(pcm16) % 2:
                raise ProtocolError(f"PCM16 chunk has {len(pcm16)} bytes: expected an even number")
            # a read-only view, not a copy: soxr only reads it (one allocation less per chunk)
            view = np.frombuffer(pcm16, dtype="<i2")
            return bytes(self._soxr.resample_chunk(view).tobytes())
        assert self._numpy is not None
        return int16_to_pcm16(self._numpy.push(pcm16_to_int16(pcm16)))
