"""Tests for voicehub.voice.audio.resample: accuracy, stopband, streaming, lengths, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.voice.audio.signals import dominant_frequency, sine
from voicehub.errors import ConfigError, ProtocolError
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
DOWN = [(a, b) for a, b in RATE_PAIRS if a > b]
UP = [(a, b) for a, b in RATE_PAIRS if a < b]
MIDDLE = slice(200, -200)  # away from the ends, where the test signals start abruptly


def stream(samples: np.ndarray, from_rate: int, to_rate: int, chunk_sizes: list[int]) -> np.ndarray:
    """Push ``samples`` in chunks of the given sizes (cycling), then flush."""
    resampler = Resampler(from_rate, to_rate)
    parts, start, index = [], 0, 0
    while start < len(samples):
        size = chunk_sizes[index % len(chunk_sizes)]
        parts.append(resampler.push(samples[start : start + size]))
        start, index = start + size, index + 1
    parts.append(resampler.flush())
    return np.concatenate(parts)


def noise(count: int, seed: int = 1) -> np.ndarray:
    values = np.random.default_rng(seed).normal(0, 4000, count)
    return np.clip(np.rint(values), -32768, 32767).astype(np.int16)


# -- accuracy ---------------------------------------------------------------------------


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS)
def test_resampling_preserves_a_sine(from_rate: int, to_rate: int) -> None:
    out = resample(sine(1000, from_rate), from_rate, to_rate)
    assert len(out) == to_rate
    assert dominant_frequency(out, to_rate) == pytest.approx(1000, abs=2)
    expected = sine(1000, to_rate)
    error = out[MIDDLE].astype(float) - expected[MIDDLE]
    # Under 2 LSB rms against a 10000 amplitude; a one-sample misalignment would be ~4000.
    assert math.sqrt(np.mean(error**2)) < 2.0


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS)
def test_a_1khz_tone_keeps_its_amplitude(from_rate: int, to_rate: int) -> None:
    out = resample(sine(1000, from_rate, amplitude=16384), from_rate, to_rate)
    gain_db = 20 * math.log10(rms(out[MIDDLE]) * math.sqrt(2) / 16384)
    # The passband ripple of an 80 dB Kaiser design is about 0.001 dB; 0.02 dB leaves room
    # for int16 rounding and still catches any real gain error.
    assert abs(gain_db) < 0.02


@pytest.mark.parametrize(("from_rate", "to_rate"), DOWN)
def test_tones_above_the_new_nyquist_are_suppressed(from_rate: int, to_rate: int) -> None:
    tone_hz = 1.2 * to_rate / 2  # would alias to 0.8 x Nyquist if let through
    out = resample(sine(tone_hz, from_rate, amplitude=16384), from_rate, to_rate)
    leaked = max(rms(out[MIDDLE]), 1 / math.sqrt(12))  # silence counts as rounding noise
    assert 20 * math.log10(16384 / math.sqrt(2) / leaked) >= 80


@pytest.mark.parametrize(("from_rate", "to_rate"), UP)
def test_upsampling_leaves_no_image_above_the_old_nyquist(from_rate: int, to_rate: int) -> None:
    tone_hz = 0.8 * from_rate / 2  # its image would sit at 1.2 x the old Nyquist
    out = resample(sine(tone_hz, from_rate, amplitude=16384), from_rate, to_rate)[MIDDLE]
    power = np.abs(np.fft.rfft(out * np.hanning(len(out)))) ** 2
    above = np.fft.rfftfreq(len(out), 1 / to_rate) > from_rate / 2
    assert 10 * math.log10(power.sum() / power[above].sum()) >= 80


@pytest.mark.parametrize(("from_rate", "to_rate"), [(48000, 8000), (22050, 8000)])
def test_resampling_removes_tones_above_the_new_nyquist(from_rate: int, to_rate: int) -> None:
    out = resample(sine(5000, from_rate), from_rate, to_rate)
    assert rms(out[200:-200]) < 3  # a 7071 rms tone, suppressed by over 65 dB


# -- streaming --------------------------------------------------------------------------


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS)
def test_streaming_in_odd_chunks_equals_one_shot(from_rate: int, to_rate: int) -> None:
    signal = noise(from_rate // 2)
    # Exact equality, no tolerance: each output sample is the same dot product of the same
    # input samples and taps wherever the chunk boundaries fall.
    streamed = stream(signal, from_rate, to_rate, [1, 7, 333, 2, 441, 1001, 3])
    assert np.array_equal(streamed, resample(signal, from_rate, to_rate))


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS[:4])
@given(chunk_sizes=st.lists(st.integers(1, 700), min_size=1, max_size=30))
def test_streaming_resampler_matches_one_shot(
    from_rate: int, to_rate: int, chunk_sizes: list[int]
) -> None:
    signal = sine(440, from_rate, seconds=sum(chunk_sizes) / from_rate)
    streamed = stream(signal, from_rate, to_rate, chunk_sizes)
    assert np.array_equal(streamed, resample(signal, from_rate, to_rate))


@settings(max_examples=50)
@given(
    pair=st.sampled_from(RATE_PAIRS),
    length=st.integers(0, 3000),
    chunk_sizes=st.lists(st.integers(1, 500), min_size=1, max_size=5),
)
def test_total_length_after_flush(
    pair: tuple[int, int], length: int, chunk_sizes: list[int]
) -> None:
    from_rate, to_rate = pair
    out = stream(noise(length), from_rate, to_rate, chunk_sizes)
    assert len(out) == -(-length * to_rate // from_rate)  # ceil(length * to / from)


def test_latency_is_16_samples_of_the_lower_rate() -> None:
    resampler = Resampler(8000, 16000)
    out = resampler.push(noise(160))  # one 20 ms frame: 320 samples are owed
    assert len(out) == 320 - 32  # 16 samples at 8 kHz = 2 ms held back, no more


def test_push_after_flush_is_refused() -> None:
    resampler = Resampler(16000, 8000)
    resampler.flush()
    assert len(resampler.flush()) == 0
    with pytest.raises(RuntimeError, match="flushed"):
        resampler.push(sine(300, 16000, 0.01))


# -- equal rates and bad input ----------------------------------------------------------


def test_equal_rates_pass_through() -> None:
    signal = sine(300, 16000, 0.1)
    assert np.array_equal(resample(signal, 16000, 16000), signal)
    assert resample_pcm16(b"\x01\x02", 8000, 8000) == b"\x01\x02"
    assert np.array_equal(Resampler(8000, 8000).push(signal), signal)


def test_pcm16_bytes_are_accepted_and_odd_byte_counts_named() -> None:
    signal = sine(300, 16000, 0.1)
    assert np.array_equal(
        Resampler(16000, 8000).push(signal.tobytes()), Resampler(16000, 8000).push(signal)
    )
    with pytest.raises(ProtocolError, match="PCM16 frame has 3 bytes: expected an even number"):
        resample_pcm16(b"\x00\x01\x02", 16000, 8000)
    with pytest.raises(ProtocolError, match="PCM16 frame has 3 bytes"):
        resample_pcm16(b"\x00\x01\x02", 16000, 16000)
    with pytest.raises(ProtocolError, match="PCM16 frame has 641 bytes"):
        Resampler(16000, 8000).push(bytes(641))


@pytest.mark.parametrize(
    ("from_rate", "to_rate", "message"),
    [
        (0, 16000, r"cannot resample 0 -> 16000 Hz: sample rates must be positive whole.*got 0"),
        (16000, -8000, r"got -8000"),
        (16000.5, 8000, r"got 16000\.5"),
        (True, 8000, r"got True"),
        (16000, 16001, r"cannot resample 16000 -> 16001 Hz: the rate ratio 16001/16000 is too"),
    ],
)
def test_unsupported_rates_are_named(from_rate: int, to_rate: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Resampler(from_rate, to_rate)
    with pytest.raises(ConfigError, match=message):
        resample_pcm16(bytes(4), from_rate, to_rate)


def test_float_or_multichannel_samples_are_refused() -> None:
    with pytest.raises(TypeError, match="takes int16 samples, got float64: convert with"):
        resample(np.zeros(160), 16000, 8000)
    with pytest.raises(ValueError, match=r"mono 1-D samples, got an array of shape \(2, 160\)"):
        Resampler(16000, 8000).push(np.zeros((2, 160), dtype=np.int16))
