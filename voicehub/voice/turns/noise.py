"""Is a short burst of caller sound a noise (a cough, a knock, a rustle) rather than speech?

Speech is voiced most of the time it is loud: the vocal folds make it periodic, at a pitch
between about 70 and 400 Hz, so each loud 30 ms frame correlates strongly with itself one
pitch period later. A cough, a knock or a burst of static is noise: its frames do not. A
burst whose loud frames are mostly unvoiced, and which is short, is noise: it neither
starts a turn nor stops the agent. The test is on the audio, so it decides before any
recogniser has spoken; unvoiced speech ("sh", "s") is short and never most of a word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_NOISE_SECONDS",
    "MIN_WORD_SECONDS",
    "BurstSound",
    "is_noise_burst",
    "listen_to_burst",
]

MAX_NOISE_SECONDS = 1.0
"""A burst longer than this is never taken for noise (the caller may be talking)."""
_FRAME_SECONDS = 0.03
_HOP_SECONDS = 0.01
_LOUD_DB = 30.0  # a frame within 30 dB of the burst's loudest is loud
_VOICED = 0.45  # normalised autocorrelation at the pitch lag: above it, a frame is voiced
_MIN_VOICED_SHARE = 0.3  # speech: at least this share of loud frames voiced
_PITCH_HZ = (70.0, 400.0)
MIN_WORD_SECONDS = 0.15
"""A burst shorter than this is a click or a knock, however periodic its ring: the
shortest words ("no", "yeah") are loud for about 0.25 s."""


@dataclass(frozen=True, slots=True)
class BurstSound:
    """What a burst of caller sound is made of."""

    loud_seconds: float  # from its first to its last loud frame
    voiced_share: float  # share of its loud frames that are voiced (periodic)
    longest_loud_seconds: float = 0.0  # its longest stretch of loud frames without a break

    @property
    def is_noise(self) -> bool:
        """Only blips too short for a word (a knock, a click), or short and mostly
        unvoiced: noise, not speech."""
        if self.longest_loud_seconds < MIN_WORD_SECONDS:
            return True
        return self.loud_seconds <= MAX_NOISE_SECONDS and self.voiced_share < _MIN_VOICED_SHARE


def listen_to_burst(samples: npt.NDArray[np.generic], sample_rate: int) -> BurstSound:
    """Measure a burst (int16 or float samples, mono). Silence is a burst of nothing."""
    audio = np.asarray(samples, dtype=np.float64).reshape(-1)
    frame = round(_FRAME_SECONDS * sample_rate)
    hop = round(_HOP_SECONDS * sample_rate)
    if len(audio) < frame:
        audio = np.pad(audio, (0, frame - len(audio)))
    count = 1 + (len(audio) - frame) // hop
    frames = np.lib.stride_tricks.sliding_window_view(audio, frame)[::hop][:count]
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = (frames * frames).sum(axis=1)
    peak = float(energy.max())
    if peak <= 0.0:
        return BurstSound(0.0, 0.0, 0.0)
    loud = energy >= peak * 10 ** (-_LOUD_DB / 10)
    indices = np.flatnonzero(loud)
    loud_seconds = float((indices[-1] - indices[0]) * hop + frame) / sample_rate
    periodicity = _periodicity(frames[loud], sample_rate)
    # runs of consecutive loud frames: the longest, as a stretch of audio
    breaks = np.flatnonzero(np.diff(indices) > 1)
    run_frames = np.diff(np.concatenate([[-1], breaks, [len(indices) - 1]]))
    longest = float((int(run_frames.max()) - 1) * hop + frame) / sample_rate
    return BurstSound(loud_seconds, float(np.mean(periodicity >= _VOICED)), longest)


def is_noise_burst(samples: npt.NDArray[np.generic], sample_rate: int) -> bool:
    """Whether a short burst of caller sound is noise, not speech (see the module)."""
    return listen_to_burst(samples, sample_rate).is_noise


def _periodicity(frames: npt.NDArray[np.float64], sample_rate: int) -> npt.NDArray[np.float64]:
    """Each frame's highest normalised cross-correlation with itself one pitch period
    (70-400 Hz) later: 1 for a periodic frame, near 0 for noise."""
    length = frames.shape[1]
    size = 1 << int(np.ceil(np.log2(2 * length)))
    spectrum = np.fft.rfft(frames, size, axis=1)
    correlation = np.fft.irfft(spectrum.real**2 + spectrum.imag**2, size, axis=1)
    low = int(sample_rate / _PITCH_HZ[1])
    high = min(int(sample_rate / _PITCH_HZ[0]), length // 2)
    lags = np.arange(low, high + 1)
    squares = np.cumsum(frames * frames, axis=1)
    total = squares[:, -1:]
    head = squares[:, length - lags - 1]  # energy of frame[: length - lag]
    tail = total - squares[:, lags - 1]  # energy of frame[lag:]
    scores = correlation[:, low : high + 1] / np.sqrt(np.maximum(head * tail, 1e-12))
    return np.asarray(scores.max(axis=1))
