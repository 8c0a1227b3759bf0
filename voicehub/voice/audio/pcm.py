"""PCM16 bytes <-> numpy sample arrays.

Sample data is mono PCM16 little-endian unless a name says otherwise.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voicehub.errors import ProtocolError

Int16Array = npt.NDArray[np.int16]
Float32Array = npt.NDArray[np.float32]


def pcm16_to_int16(pcm16: bytes | bytearray | memoryview) -> Int16Array:
    """Return the samples of little-endian PCM16 bytes (a copy, safe to modify)."""
    if len(pcm16) % 2:
        raise ProtocolError(f"PCM16 frame has {len(pcm16)} bytes: expected an even number")
    return np.frombuffer(pcm16, dtype="<i2").astype(np.int16)


def int16_to_pcm16(samples: npt.ArrayLike) -> bytes:
    """Return little-endian PCM16 bytes for int16 samples."""
    return np.asarray(samples, dtype=np.int16).astype("<i2", copy=False).tobytes()


def pcm16_to_float32(pcm16: bytes | bytearray | memoryview) -> Float32Array:
    """Return samples scaled to [-1.0, 1.0)."""
    return pcm16_to_int16(pcm16).astype(np.float32) / np.float32(32768.0)


def float_to_int16(samples: npt.ArrayLike) -> Int16Array:
    """Scale float samples in [-1, 1] to int16, rounding and clipping out-of-range values."""
    scaled = np.rint(np.asarray(samples, dtype=np.float64) * 32768.0)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def float32_to_pcm16(samples: npt.ArrayLike) -> bytes:
    """Return PCM16 bytes for float samples in [-1, 1]."""
    return int16_to_pcm16(float_to_int16(samples))
