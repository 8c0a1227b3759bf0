"""The bundled sounds (`data/`, made by `synth`), at a call's rate and a desk's level."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from voicehub.errors import ConfigError
from voicehub.voice.audio import int16_to_pcm16, pcm16_to_int16, read_wav, resample

__all__ = ["SOUND_NAMES", "sound_pcm"]

_DATA = Path(__file__).resolve().parent / "data"

SOUND_NAMES = ("soft-pulse", "keys", "hold-music")
"""The sounds voicehub ships."""


@lru_cache(maxsize=32)
def sound_pcm(name: str, sample_rate: int, volume_db: float = 0.0) -> bytes:
    """Sound `name` as PCM16 at `sample_rate`, `volume_db` below its bundled level."""
    if name not in SOUND_NAMES:
        raise ConfigError(f"sound {name!r}: expected one of {', '.join(SOUND_NAMES)}")
    audio = read_wav(_DATA / f"{name}.wav")
    samples = pcm16_to_int16(audio.pcm16)
    if audio.sample_rate != sample_rate:
        samples = resample(samples, audio.sample_rate, sample_rate)
    scaled = np.rint(samples.astype(np.float64) * 10 ** (volume_db / 20))
    return int16_to_pcm16(np.clip(scaled, -32768, 32767).astype(np.int16))
