"""The noise bench's noise maker: the same noise for a seed, at the asked level, mixed at the
asked SNR against the talker's active level."""

from __future__ import annotations

import numpy as np
import pytest

from voicehub_dev.bench.noise_mix import active_rms, mix, noise


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["car", "street"])
def test_a_seed_makes_the_same_noise_at_about_minus_20_dbfs(kind: str) -> None:
    first = noise(kind, 1.0, 8000, seed=3)  # type: ignore[arg-type]
    assert np.array_equal(first, noise(kind, 1.0, 8000, seed=3))  # type: ignore[arg-type]
    assert not np.array_equal(first, noise(kind, 1.0, 8000, seed=4))  # type: ignore[arg-type]
    level = 20 * np.log10(np.sqrt(np.mean(first**2)) / 32768)
    assert level == pytest.approx(-20.0, abs=0.01)


def test_car_noise_lives_low_in_the_spectrum() -> None:
    car = noise("car", 2.0, 8000, seed=1)
    spectrum = np.abs(np.fft.rfft(car)) ** 2
    freqs = np.fft.rfftfreq(len(car), 1 / 8000)
    assert spectrum[freqs < 500].sum() > 0.8 * spectrum.sum()


@pytest.mark.parametrize("snr", [10.0, 0.0])
def test_mix_puts_the_noise_at_the_snr_against_the_talkers_active_level(snr: float) -> None:
    t = np.arange(16000) / 8000
    talker = np.where(t < 1.0, 6000 * np.sin(2 * np.pi * 300 * t), 0.0).astype(np.int16)
    background = noise("street", 2.0, 8000, seed=2)
    mixed = mix(talker, background, snr).astype(np.float64)
    under = mixed - talker
    ratio = active_rms(talker.astype(np.float64)) / np.sqrt(np.mean(under**2))
    assert 20 * np.log10(ratio) == pytest.approx(snr, abs=0.1)


def test_an_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="noise kind 'rain': expected one of babble, street, car"):
        noise("rain", 1.0, 8000)  # type: ignore[arg-type]
