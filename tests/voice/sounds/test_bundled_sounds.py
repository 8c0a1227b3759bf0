"""The bundled sounds are what their committed script makes, short, and at a call's rate."""

from __future__ import annotations

import numpy as np
import pytest

from voicehub.errors import ConfigError
from voicehub.voice.audio import pcm16_to_int16, read_wav
from voicehub.voice.sounds import SOUND_NAMES, sound_pcm
from voicehub.voice.sounds.synth import DATA, RATE, SYNTHS, synthesize


@pytest.mark.parametrize("name", SOUND_NAMES)
def test_each_file_is_what_the_script_makes(name: str) -> None:
    audio = read_wav(DATA / f"{name}.wav")
    assert audio.sample_rate == RATE
    bundled = pcm16_to_int16(audio.pcm16).astype(np.int32)
    made = pcm16_to_int16(synthesize(name)).astype(np.int32)
    assert bundled.shape == made.shape
    assert int(np.abs(bundled - made).max()) <= 2  # a last-bit difference of another libm
    assert len(bundled) <= 8 * RATE  # at most eight seconds: loops, not recordings


def test_every_name_a_desk_may_choose_is_bundled() -> None:
    assert set(SOUND_NAMES) == set(SYNTHS)


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_sounds_come_at_the_calls_rate_and_the_desks_level(rate: int) -> None:
    full = pcm16_to_int16(sound_pcm("soft-pulse", rate, 0.0)).astype(np.float64)
    quieter = pcm16_to_int16(sound_pcm("soft-pulse", rate, -12.0)).astype(np.float64)
    assert len(full) == pytest.approx(2.4 * rate, abs=2)
    ratio = np.sqrt(np.mean(quieter**2) / np.mean(full**2))
    assert 20 * np.log10(ratio) == pytest.approx(-12.0, abs=0.1)


def test_an_unknown_sound_is_named() -> None:
    with pytest.raises(ConfigError, match="sound 'beep': expected one of soft-pulse"):
        sound_pcm("beep", 8000)
