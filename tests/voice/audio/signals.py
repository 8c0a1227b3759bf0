"""Test signals and spectrum helpers shared by the audio tests."""

from __future__ import annotations

import numpy as np


def sine(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 10000) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return np.rint(amplitude * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))
