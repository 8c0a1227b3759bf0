"""Signal level: RMS, dBFS, and how much energy lies above a frequency."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from voicehub.voice.audio.pcm import pcm16_to_int16


def rms(samples: bytes | npt.ArrayLike) -> float:
    """Root mean square of int16 samples (or PCM16 bytes), in sample units (0 for empty)."""
    data = pcm16_to_int16(samples) if isinstance(samples, bytes | bytearray) else samples
    values = np.asarray(data, dtype=np.float64)
    return float(np.sqrt(np.mean(values * values))) if values.size else 0.0


def dbfs(samples: bytes | npt.ArrayLike) -> float:
    """Level relative to full scale in dB (-inf for digital silence)."""
    level = rms(samples)
    return 20.0 * math.log10(level / 32768.0) if level > 0 else -math.inf


def energy_above(samples: npt.ArrayLike, sample_rate: int, cutoff_hz: float) -> float:
    """Fraction of the energy above ``cutoff_hz`` (0 for silence).

    Tells band-limited audio from full-band: 8 kHz phone audio upsampled to 16 kHz has
    under 1e-6 of its energy above 4.5 kHz; wideband speech has over 1e-4. The Hann window
    keeps the window edges from leaking energy into the high band.
    """
    values = np.asarray(samples, dtype=np.float64)
    if values.size < 2:
        return 0.0
    power = np.abs(np.fft.rfft(values * np.hanning(values.size))) ** 2
    freqs = np.fft.rfftfreq(values.size, 1.0 / sample_rate)
    total = float(power[freqs > 100].sum())  # below 100 Hz is hum and DC, not speech
    return float(power[freqs > cutoff_hz].sum()) / total if total > 0 else 0.0
