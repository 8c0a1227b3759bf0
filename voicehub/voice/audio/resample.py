"""Sample-rate conversion of int16 audio: a streaming polyphase windowed-sinc resampler.

Why not soxr: its HQ stream is faster and cleaner (``voicehub bench --only audio`` measures
both), but it returns output in blocks and holds back tens of milliseconds of audio, where
this filter holds back one or two. A call pays that delay twice (caller audio in, speech
out), so this filter stays; both keep tones past the Nyquist frequency below int16
rounding.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from voicehub.errors import ConfigError
from voicehub.voice.audio.pcm import Int16Array, int16_to_pcm16, pcm16_to_int16

_ZERO_CROSSINGS = 16  # filter half-length in periods of the lower rate's Nyquist
_KAISER_BETA = 8.6  # about 80 dB stopband
_ROLLOFF = 0.92  # passband edge as a fraction of the lower Nyquist: keeps aliasing out


@lru_cache(maxsize=32)
def _polyphase_filter(up: int, down: int) -> tuple[npt.NDArray[np.float64], int]:
    """Return the filter as (up, taps) phase rows, and its delay in upsampled samples."""
    factor = max(up, down)
    half = _ZERO_CROSSINGS * factor
    n = np.arange(-half, half + 1, dtype=np.float64)
    cutoff = _ROLLOFF / factor
    taps = cutoff * np.sinc(cutoff * n) * np.kaiser(2 * half + 1, _KAISER_BETA)
    taps *= up / taps.sum()  # unity gain at DC after zero-stuffing by `up`
    per_phase = math.ceil(len(taps) / up)
    padded = np.zeros(per_phase * up)
    padded[: len(taps)] = taps
    # Row p holds taps p, p+up, p+2up... (the only ones that meet nonzero input for phase p),
    # reversed so that a row dots with input samples in time order.
    return padded.reshape(per_phase, up).T[:, ::-1].copy(), half


def _rate_ratio(from_rate: int, to_rate: int) -> tuple[int, int]:
    """Return (up, down), the conversion ratio in lowest terms; ConfigError for bad rates."""
    for rate in (from_rate, to_rate):
        if isinstance(rate, bool) or not isinstance(rate, int | np.integer) or rate <= 0:
            raise ConfigError(
                f"cannot resample {from_rate!r} -> {to_rate!r} Hz: sample rates must be "
                f"positive whole numbers of Hz, got {rate!r}"
            )
    gcd = math.gcd(int(from_rate), int(to_rate))
    up, down = int(to_rate) // gcd, int(from_rate) // gcd
    if max(up, down) > 2000:  # the filter has 32 x max(up, down) taps: keep it small
        raise ConfigError(
            f"cannot resample {from_rate} -> {to_rate} Hz: the rate ratio {up}/{down} is too "
            "fine; use common rates such as 8000, 16000, 22050, 24000, 44100 or 48000"
        )
    return up, down


class Resampler:
    """A streaming rational resampler: push int16 chunks, get int16 chunks, then flush.

    The output is aligned with the input (the filter delay is compensated) and the total
    output length is ``ceil(n_in * to_rate / from_rate)``. Latency is 16 samples of the
    lower rate. Equal rates pass samples through unchanged.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self._up, self._down = _rate_ratio(from_rate, to_rate)
        self.from_rate, self.to_rate = int(from_rate), int(to_rate)
        self._phases, self._delay = _polyphase_filter(self._up, self._down)
        self._taps = self._phases.shape[1]
        history = self._taps - 1  # zeros standing for the samples before the stream start
        self._buffer = np.zeros(history, dtype=np.float64)
        self._buffer_start = -history  # absolute input index of _buffer[0]
        self._consumed = 0  # input samples pushed so far
        self._produced = 0  # output samples returned so far
        self._flushed = False

    def push(self, samples: npt.ArrayLike | bytes | bytearray) -> Int16Array:
        """Feed int16 samples (or PCM16 bytes); return the output samples now computable."""
        if self._flushed:
            raise RuntimeError("Resampler was flushed: create a new one for a new stream")
        data = _int16_samples(samples)
        if self.from_rate == self.to_rate:
            return data
        chunk = data.astype(np.float64)
        self._buffer = np.concatenate((self._buffer, chunk))
        self._consumed += len(chunk)
        return self._produce(self._consumed)

    def flush(self) -> Int16Array:
        """Return the remaining output (the filter tail), and end the stream."""
        if self._flushed:
            return np.zeros(0, dtype=np.int16)
        self._flushed = True
        if self.from_rate == self.to_rate:
            return np.zeros(0, dtype=np.int16)
        total = -(-self._consumed * self._up // self._down)  # ceil without floats
        tail = np.zeros(self._delay // self._up + 1, dtype=np.float64)
        self._buffer = np.concatenate((self._buffer, tail))
        return self._produce(self._consumed + len(tail), limit=total)

    def _produce(self, available: int, limit: int | None = None) -> Int16Array:
        # Output n needs input up to index (n*down + delay) // up.
        last = ((available * self._up) - self._delay - 1) // self._down
        stop = last + 1 if limit is None else min(last + 1, limit)
        if stop <= self._produced:
            return np.zeros(0, dtype=np.int16)
        positions = np.arange(self._produced, stop, dtype=np.int64) * self._down + self._delay
        oldest = positions // self._up - self._buffer_start - (self._taps - 1)
        rows = sliding_window_view(self._buffer, self._taps)[oldest]
        values: npt.NDArray[np.float64] = np.einsum(
            "nk,nk->n", rows, self._phases[positions % self._up]
        )
        self._produced = stop
        # Keep only the history the next output can still reach.
        next_newest = (stop * self._down + self._delay) // self._up - self._buffer_start
        drop = max(0, min(int(next_newest) - (self._taps - 1), len(self._buffer)))
        self._buffer = self._buffer[drop:]
        self._buffer_start += drop
        return np.clip(np.rint(values), -32768, 32767).astype(np.int16)


def _int16_samples(samples: npt.ArrayLike | bytes | bytearray) -> Int16Array:
    """A copy of ``samples`` as a 1-D int16 array; refuses what would be silently garbled."""
    if isinstance(samples, bytes | bytearray):
        return pcm16_to_int16(samples)  # odd byte counts raise ProtocolError
    data = np.asarray(samples)
    if data.ndim != 1:
        raise ValueError(f"Resampler takes mono 1-D samples, got an array of shape {data.shape}")
    if data.size and not np.issubdtype(data.dtype, np.integer):
        # float audio in [-1, 1] would come out as near-silence: convert it first
        raise TypeError(
            f"Resampler takes int16 samples, got {data.dtype}: convert with float_to_int16"
        )
    return data.astype(np.int16)


def resample(samples: npt.ArrayLike, from_rate: int, to_rate: int) -> Int16Array:
    """Resample a whole int16 signal (windowed-sinc polyphase, linear phase)."""
    data = _int16_samples(samples)
    resampler = Resampler(from_rate, to_rate)
    if from_rate == to_rate:
        return data
    # Chunks of one second bound the temporary filter matrix for long signals.
    parts = [resampler.push(data[i : i + from_rate]) for i in range(0, len(data), from_rate)]
    return np.concatenate([*parts, resampler.flush()])


def resample_pcm16(pcm16: bytes | bytearray, from_rate: int, to_rate: int) -> bytes:
    """Resample PCM16 bytes; returns the input unchanged when the rates match."""
    samples = pcm16_to_int16(pcm16)  # odd byte counts raise ProtocolError
    if from_rate == to_rate:
        _rate_ratio(from_rate, to_rate)  # still reject nonsense rates
        return bytes(pcm16)
    return int16_to_pcm16(resample(samples, from_rate, to_rate))
