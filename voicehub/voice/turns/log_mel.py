"""Whisper's log-mel features, in numpy, for a batch of utterances at once.

Smart Turn v3 is a Whisper-tiny encoder with a classifier head: it reads the features
Whisper's feature extractor makes of the last 8 s of audio (16 kHz; 80 mel bands, 25 ms
windows every 10 ms, so 800 frames), after scaling each waveform to zero mean and unit
variance. This is that extractor (the Slaney mel scale and filter normalisation, a centred
STFT with reflection at the edges, `log10` clipped to 8 below the peak, then `(x + 4) / 4`),
written for a batch: one FFT call for every utterance of a batch, not one per call. It
agrees with faster-whisper's `FeatureExtractor` and with pipecat's own (tests).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["FRAMES", "MEL_BANDS", "SAMPLE_RATE", "WINDOW_SAMPLES", "log_mel_batch"]

SAMPLE_RATE = 16000
WINDOW_SAMPLES = 8 * SAMPLE_RATE  # the model reads the last 8 s
MEL_BANDS = 80
FRAMES = 800
_N_FFT = 400
_HOP = 160


def log_mel_batch(waveforms: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Features of shape (batch, 80, 800) for `waveforms` of shape (batch, 128000): 8 s of
    16 kHz audio each, already cut or padded to the window (`fit_window`).

    A short utterance is mostly leading zeros, which the scaling turns into one constant:
    every frame wholly inside that stretch has the same spectrum, computed once. Only the
    frames that touch the utterance go through the FFT, all rows' in one call.
    """
    if waveforms.ndim != 2 or waveforms.shape[1] != WINDOW_SAMPLES:
        raise ValueError(
            f"expected waveforms of shape (batch, {WINDOW_SAMPLES}), got {waveforms.shape}"
        )
    x = waveforms.astype(np.float32, copy=False)
    # Zero mean, unit variance per utterance (in float32, as the reference does it).
    mean = x.mean(axis=1, keepdims=True)
    x = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + np.float32(1e-7))
    pad = _N_FFT // 2
    padded = np.pad(x.astype(np.float64), ((0, 0), (pad, pad)), mode="reflect")
    frames = sliding_window_view(padded, _N_FFT, axis=1)[:, ::_HOP]  # (batch, 801, 400)
    alike = [_constant_frames(row) for row in waveforms]
    # The first frame of each row stands for its constant ones (it is one of them).
    wanted = np.concatenate([frames[row, max(k - 1, 0) :] for row, k in enumerate(alike)])
    spectrum = np.fft.rfft(wanted * _hann(), axis=-1)
    power = spectrum.real**2 + spectrum.imag**2
    mel_rows = np.maximum(power @ _mel_filters(), 1e-10)  # (frames computed, 80)
    mel = np.empty((len(waveforms), frames.shape[1], MEL_BANDS))
    start = 0
    for row, k in enumerate(alike):
        first = max(k - 1, 0)
        count = frames.shape[1] - first
        mel[row, first:] = mel_rows[start : start + count]
        mel[row, :first] = mel_rows[start]
        start += count
    log_spec = np.log10(mel[:, :-1])  # the reference drops the last frame
    peak = log_spec.max(axis=(1, 2), keepdims=True)
    log_spec = (np.maximum(log_spec, peak - 8.0) + 4.0) / 4.0
    return np.ascontiguousarray(log_spec.transpose(0, 2, 1), dtype=np.float32)


def _constant_frames(waveform: npt.NDArray[np.float32]) -> int:
    """How many leading frames lie wholly in the waveform's leading zeros (and in their
    mirror image, the reflected padding before them): all alike after scaling."""
    nonzero = np.flatnonzero(waveform)
    zeros = int(nonzero[0]) if len(nonzero) else len(waveform)
    # frame i reads padded samples [160 i, 160 i + 400), that is waveform samples
    # [160 i - 200, 160 i + 200): constant while 160 i + 200 <= zeros
    if zeros < _N_FFT // 2:
        return 0
    return min((zeros - _N_FFT // 2) // _HOP + 1, FRAMES + 1)


def fit_window(audio: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The last 8 s of `audio`, or all of it after leading zeros (the model's input)."""
    if len(audio) >= WINDOW_SAMPLES:
        return audio[-WINDOW_SAMPLES:]
    fitted = np.zeros(WINDOW_SAMPLES, dtype=np.float32)
    if len(audio):
        fitted[-len(audio) :] = audio
    return fitted


@functools.cache
def _hann() -> npt.NDArray[np.float64]:
    return np.hanning(_N_FFT + 1)[:-1]  # periodic, as torch.hann_window


def _hertz_to_mel(hertz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The Slaney mel scale: linear below 1 kHz, logarithmic above."""
    mel = 3.0 * hertz / 200.0
    above = hertz >= 1000.0
    mel[above] = 15.0 + np.log(hertz[above] / 1000.0) * (27.0 / np.log(6.4))
    return mel


def _mel_to_hertz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    hertz = 200.0 * mel / 3.0
    above = mel >= 15.0
    hertz[above] = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel[above] - 15.0))
    return hertz


@functools.cache
def _mel_filters() -> npt.NDArray[np.float64]:
    """Triangular filters of shape (201 FFT bins, 80 bands), each of unit area (Slaney)."""
    edges_mel = np.linspace(0.0, _hertz_to_mel(np.array([SAMPLE_RATE / 2.0]))[0], MEL_BANDS + 2)
    edges = _mel_to_hertz(edges_mel)
    bins = np.linspace(0, SAMPLE_RATE // 2, _N_FFT // 2 + 1)
    slopes = edges[np.newaxis, :] - bins[:, np.newaxis]  # (bins, bands + 2)
    widths = np.diff(edges)
    rising = -slopes[:, :-2] / widths[:-1]
    falling = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(rising, falling))
    return filters * (2.0 / (edges[2:] - edges[:-2]))[np.newaxis, :]
