"""Tests for voicehub.voice.audio.resample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.voice.audio.signals import dominant_frequency, sine
from voicehub.voice.audio.level import rms
from voicehub.voice.audio.resample import Resampler, resample, resample_pcm16

RATE_PAIRS = [
    (8000, 16000),
    (16000, 8000),
    (22050, 16000),
    (16000, 22050),
    (24000, 16000),
    (48000, 16000),
    (16000, 48000),
    (48000, 8000),
    (22050, 8000),
]


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS)
def test_resampling_preserves_a_sine(from_rate: int, to_rate: int) -> None:
    out = resample(sine(1000, from_rate), from_rate, to_rate)
    assert len(out) == to_rate
    assert dominant_frequency(out, to_rate) == pytest.approx(1000, abs=2)
    expected = sine(1000, to_rate)
    middle = slice(100, -100)  # away from the edges, where the input starts abruptly
    error = out[middle].astype(float) - expected[middle]
    assert math.sqrt(np.mean(error**2)) < 2.0  # under 2 LSB rms against a 10000 amplitude


@pytest.mark.parametrize(("from_rate", "to_rate"), [(48000, 8000), (22050, 8000)])
def test_resampling_removes_tones_above_the_new_nyquist(from_rate: int, to_rate: int) -> None:
    out = resample(sine(5000, from_rate), from_rate, to_rate)
    assert rms(out[200:-200]) < 3  # a 7071 rms tone, suppressed by over 65 dB


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS[:4])
@given(chunk_sizes=st.lists(st.integers(1, 700), min_size=1, max_size=30))
def test_streaming_resampler_matches_one_shot(
    from_rate: int, to_rate: int, chunk_sizes: list[int]
) -> None:
    signal = sine(440, from_rate, seconds=sum(chunk_sizes) / from_rate)
    resampler = Resampler(from_rate, to_rate)
    parts, start = [], 0
    for size in chunk_sizes:
        parts.append(resampler.push(signal[start : start + size]))
        start += size
    parts.append(resampler.flush())
    assert np.array_equal(np.concatenate(parts), resample(signal, from_rate, to_rate))


def test_equal_rates_pass_through_and_bad_rates_are_rejected() -> None:
    signal = sine(300, 16000, 0.1)
    assert np.array_equal(resample(signal, 16000, 16000), signal)
    assert resample_pcm16(b"\x01\x02", 8000, 8000) == b"\x01\x02"
    with pytest.raises(ValueError, match="sample rates must be positive"):
        Resampler(0, 16000)
    with pytest.raises(ValueError, match="too fine"):
        Resampler(16000, 16001)
