"""Tests for voicehub.voice.audio.level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.voice.audio.signals import sine
from voicehub.voice.audio.level import dbfs, energy_above, rms
from voicehub.voice.audio.pcm import int16_to_pcm16
from voicehub.voice.audio.resample import resample


def test_rms_and_dbfs() -> None:
    tone = sine(1000, 16000, amplitude=16384)
    assert rms(tone) == pytest.approx(16384 / math.sqrt(2), rel=1e-3)
    assert rms(int16_to_pcm16(tone)) == pytest.approx(rms(tone))
    assert dbfs(tone) == pytest.approx(-9.03, abs=0.01)
    assert rms(b"") == 0.0
    assert dbfs(bytes(320)) == -math.inf


def test_energy_above_tells_phone_audio_from_wideband() -> None:
    noise = np.random.default_rng(3).normal(0, 3000, 8000)
    wideband = np.clip(np.rint(noise), -32768, 32767).astype(np.int16)
    phone = resample(resample(wideband, 16000, 8000), 8000, 16000)
    assert energy_above(wideband, 16000, 4500) > 0.3  # white noise: about 44%
    assert energy_above(phone, 16000, 4500) < 1e-6
    assert energy_above(np.zeros(320), 16000, 4500) == 0.0
