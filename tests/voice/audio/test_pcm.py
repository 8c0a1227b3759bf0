"""Tests for voicehub.voice.audio.pcm: PCM16 bytes <-> arrays."""

from __future__ import annotations

import numpy as np
import pytest

from voicehub.errors import ProtocolError
from voicehub.voice.audio.pcm import (
    float32_to_pcm16,
    int16_to_pcm16,
    pcm16_to_float32,
    pcm16_to_int16,
)


def test_pcm16_round_trip() -> None:
    values = np.array([0, 1, -1, 32767, -32768, 1234], dtype=np.int16)
    pcm = int16_to_pcm16(values)
    assert pcm == values.astype("<i2").tobytes()
    assert np.array_equal(pcm16_to_int16(pcm), values)


def test_odd_pcm16_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="PCM16 frame has 321 bytes: expected an even number"):
        pcm16_to_int16(bytes(321))


def test_float_conversion_scales_and_clips() -> None:
    pcm = float32_to_pcm16([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0])
    assert list(pcm16_to_int16(pcm)) == [0, 16384, -16384, 32767, -32768, 32767, -32768]
    assert pcm16_to_float32(int16_to_pcm16([16384, -32768])).tolist() == [0.5, -1.0]
