"""G.711 mu-law and A-law on numpy: the classic Sun reference algorithm, as in CPython's
audioop, bit-exact with it (audioop is gone from Python 3.13).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voicehub.errors import ProtocolError
from voicehub.voice.audio.pcm import Int16Array, int16_to_pcm16

_SEG_ULAW_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_SEG_ALAW_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)
_ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32)


def _build_ulaw_encode_table() -> npt.NDArray[np.uint8]:
    pcm = _ALL_INT16 >> 2  # 14-bit input; the arithmetic shift is part of bit-exactness
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(pcm), 8159) + (0x84 >> 2)
    seg = np.searchsorted(_SEG_ULAW_END, magnitude, side="left")
    code = (np.minimum(seg, 7) << 4) | ((magnitude >> (np.minimum(seg, 7) + 1)) & 0xF)
    code = np.where(seg >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _build_alaw_encode_table() -> npt.NDArray[np.uint8]:
    pcm = _ALL_INT16 >> 3  # 13-bit input
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)
    seg = np.searchsorted(_SEG_ALAW_END, magnitude, side="left")
    shift = np.where(seg < 2, 1, np.minimum(seg, 7))
    code = (np.minimum(seg, 7) << 4) | ((magnitude >> shift) & 0xF)
    code = np.where(seg >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _build_ulaw_decode_table() -> Int16Array:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.int16)


def _build_alaw_decode_table() -> Int16Array:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = (a & 0x0F) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(a & 0x80, t, -t).astype(np.int16)


# Lookup tables make encoding one fancy-index per frame: cheap enough for every call leg.
# The encode tables are indexed by the sample's 16 bits read unsigned, so PCM16 bytes index
# them as they are (no copy, no widening): -1 is 0xFFFF, -32768 is 0x8000.
_ULAW_ENCODE = np.roll(_build_ulaw_encode_table(), -32768)
_ALAW_ENCODE = np.roll(_build_alaw_encode_table(), -32768)
_ULAW_DECODE = _build_ulaw_decode_table()
_ALAW_DECODE = _build_alaw_decode_table()


def _unsigned_samples(pcm16: bytes | bytearray | memoryview) -> npt.NDArray[np.uint16]:
    """The PCM16 samples' bits as unsigned 16-bit indexes (a view, not a copy)."""
    if len(pcm16) % 2:
        raise ProtocolError(f"PCM16 frame has {len(pcm16)} bytes: expected an even number")
    return np.frombuffer(pcm16, dtype="<u2")


def lin2ulaw(pcm16: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 to G.711 mu-law, bit-exact with ``audioop.lin2ulaw(data, 2)``."""
    return _ULAW_ENCODE[_unsigned_samples(pcm16)].tobytes()


def ulaw2lin(ulaw: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 mu-law to PCM16, bit-exact with ``audioop.ulaw2lin(data, 2)``."""
    return int16_to_pcm16(_ULAW_DECODE[np.frombuffer(ulaw, dtype=np.uint8)])


def lin2alaw(pcm16: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 to G.711 A-law, bit-exact with ``audioop.lin2alaw(data, 2)``."""
    return _ALAW_ENCODE[_unsigned_samples(pcm16)].tobytes()


def alaw2lin(alaw: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 A-law to PCM16, bit-exact with ``audioop.alaw2lin(data, 2)``."""
    return int16_to_pcm16(_ALAW_DECODE[np.frombuffer(alaw, dtype=np.uint8)])
