"""Audio utilities on numpy: PCM16 conversion, G.711, resampling, framing, WAV, level.

Everything here is pure and synchronous so transports, providers and tests share one
implementation. Sample data is mono PCM16 little-endian unless a name says otherwise.
"""

from __future__ import annotations

import io
import math
import wave
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from voicehub.errors import ProtocolError

Int16Array = npt.NDArray[np.int16]
Float32Array = npt.NDArray[np.float32]

FRAME_MS = 20
"""Frame duration every transport and the voice session agree on."""

# -- PCM16 <-> arrays ---------------------------------------------------------------------


def pcm16_to_int16(pcm16: bytes | bytearray | memoryview) -> Int16Array:
    """Return the samples of little-endian PCM16 bytes (a copy, safe to modify)."""
    if len(pcm16) % 2:
        raise ProtocolError(f"PCM16 frame has {len(pcm16)} bytes: expected an even number")
    return np.frombuffer(pcm16, dtype="<i2").astype(np.int16)


def int16_to_pcm16(samples: npt.ArrayLike) -> bytes:
    """Return little-endian PCM16 bytes for int16 samples."""
    return np.asarray(samples, dtype=np.int16).astype("<i2", copy=False).tobytes()


def pcm16_to_float32(pcm16: bytes | bytearray | memoryview) -> Float32Array:
    """Return samples scaled to [-1.0, 1.0)."""
    return pcm16_to_int16(pcm16).astype(np.float32) / np.float32(32768.0)


def float_to_int16(samples: npt.ArrayLike) -> Int16Array:
    """Scale float samples in [-1, 1] to int16, rounding and clipping out-of-range values."""
    scaled = np.rint(np.asarray(samples, dtype=np.float64) * 32768.0)
    return np.clip(scaled, -32768, 32767).astype(np.int16)


def float32_to_pcm16(samples: npt.ArrayLike) -> bytes:
    """Return PCM16 bytes for float samples in [-1, 1]."""
    return int16_to_pcm16(float_to_int16(samples))


# -- G.711 (the classic Sun reference algorithm, as in CPython's audioop) -----------------

_SEG_ULAW_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_SEG_ALAW_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)
_ALL_INT16 = np.arange(-32768, 32768, dtype=np.int32)


def _build_ulaw_encode_table() -> npt.NDArray[np.uint8]:
    pcm = _ALL_INT16 >> 2  # 14-bit input; the arithmetic shift is part of bit-exactness
    mask = np.where(pcm < 0, 0x7F, 0xFF)
    magnitude = np.minimum(np.abs(pcm), 8159) + (0x84 >> 2)
    seg = np.searchsorted(_SEG_ULAW_END, magnitude, side="left")
    code = (np.minimum(seg, 7) << 4) | ((magnitude >> (np.minimum(seg, 7) + 1)) & 0xF)
    code = np.where(seg >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _build_alaw_encode_table() -> npt.NDArray[np.uint8]:
    pcm = _ALL_INT16 >> 3  # 13-bit input
    mask = np.where(pcm >= 0, 0xD5, 0x55)
    magnitude = np.where(pcm >= 0, pcm, -pcm - 1)
    seg = np.searchsorted(_SEG_ALAW_END, magnitude, side="left")
    shift = np.where(seg < 2, 1, np.minimum(seg, 7))
    code = (np.minimum(seg, 7) << 4) | ((magnitude >> shift) & 0xF)
    code = np.where(seg >= 8, 0x7F, code)
    return ((code ^ mask) & 0xFF).astype(np.uint8)


def _build_ulaw_decode_table() -> Int16Array:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.int16)


def _build_alaw_decode_table() -> Int16Array:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    seg = (a & 0x70) >> 4
    t = (a & 0x0F) << 4
    t = np.where(seg == 0, t + 8, (t + 0x108) << np.maximum(seg - 1, 0))
    return np.where(a & 0x80, t, -t).astype(np.int16)


# Lookup tables make encoding one fancy-index per frame: cheap enough for every call leg.
_ULAW_ENCODE = _build_ulaw_encode_table()
_ALAW_ENCODE = _build_alaw_encode_table()
_ULAW_DECODE = _build_ulaw_decode_table()
_ALAW_DECODE = _build_alaw_decode_table()


def lin2ulaw(pcm16: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 to G.711 mu-law, bit-exact with ``audioop.lin2ulaw(data, 2)``."""
    samples = pcm16_to_int16(pcm16)
    return _ULAW_ENCODE[samples.astype(np.int32) + 32768].tobytes()


def ulaw2lin(ulaw: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 mu-law to PCM16, bit-exact with ``audioop.ulaw2lin(data, 2)``."""
    return int16_to_pcm16(_ULAW_DECODE[np.frombuffer(ulaw, dtype=np.uint8)])


def lin2alaw(pcm16: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 to G.711 A-law, bit-exact with ``audioop.lin2alaw(data, 2)``."""
    samples = pcm16_to_int16(pcm16)
    return _ALAW_ENCODE[samples.astype(np.int32) + 32768].tobytes()


def alaw2lin(alaw: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 A-law to PCM16, bit-exact with ``audioop.alaw2lin(data, 2)``."""
    return int16_to_pcm16(_ALAW_DECODE[np.frombuffer(alaw, dtype=np.uint8)])


# -- Resampling (polyphase windowed-sinc) -------------------------------------------------

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


class Resampler:
    """A streaming rational resampler: push int16 chunks, get int16 chunks, then flush.

    The output is aligned with the input (the filter delay is compensated) and the total
    output length is ``ceil(n_in * to_rate / from_rate)``. Latency is 16 samples of the
    lower rate. Equal rates pass samples through unchanged.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {from_rate} -> {to_rate} Hz")
        gcd = math.gcd(from_rate, to_rate)
        self.from_rate, self.to_rate = from_rate, to_rate
        self._up, self._down = to_rate // gcd, from_rate // gcd
        if max(self._up, self._down) > 2000:
            raise ValueError(
                f"cannot resample {from_rate} -> {to_rate} Hz: the rate ratio "
                f"{self._up}/{self._down} is too fine; use common rates such as 8000, 16000, "
                "22050, 24000, 44100 or 48000"
            )
        self._phases, self._delay = _polyphase_filter(self._up, self._down)
        self._taps = self._phases.shape[1]
        history = self._taps - 1  # zeros standing for the samples before the stream start
        self._buffer = np.zeros(history, dtype=np.float64)
        self._buffer_start = -history  # absolute input index of _buffer[0]
        self._consumed = 0  # input samples pushed so far
        self._produced = 0  # output samples returned so far
        self._flushed = False

    def push(self, samples: npt.ArrayLike) -> Int16Array:
        """Feed int16 samples; return the output samples that are now computable."""
        if self._flushed:
            raise RuntimeError("Resampler was flushed: create a new one for a new stream")
        if self.from_rate == self.to_rate:
            return np.array(samples, dtype=np.int16)
        chunk = np.asarray(samples, dtype=np.float64)
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


def resample(samples: npt.ArrayLike, from_rate: int, to_rate: int) -> Int16Array:
    """Resample a whole int16 signal (windowed-sinc polyphase, linear phase)."""
    data = np.asarray(samples, dtype=np.int16)
    if from_rate == to_rate:
        return data.copy()
    resampler = Resampler(from_rate, to_rate)
    # Chunks of one second bound the temporary filter matrix for long signals.
    parts = [resampler.push(data[i : i + from_rate]) for i in range(0, len(data), from_rate)]
    return np.concatenate([*parts, resampler.flush()])


def resample_pcm16(pcm16: bytes, from_rate: int, to_rate: int) -> bytes:
    """Resample PCM16 bytes; returns the input unchanged when the rates match."""
    if from_rate == to_rate:
        pcm16_to_int16(pcm16)  # still reject odd-sized input
        return bytes(pcm16)
    return int16_to_pcm16(resample(pcm16_to_int16(pcm16), from_rate, to_rate))


# -- Framing ------------------------------------------------------------------------------


def frame_bytes(sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2) -> int:
    """Bytes in one mono frame: 640 for 20 ms at 16 kHz PCM16, 160 for 20 ms of 8 kHz mu-law."""
    samples, rest = divmod(sample_rate * frame_ms, 1000)
    if rest or samples <= 0:
        raise ValueError(f"{frame_ms} ms at {sample_rate} Hz is not a whole number of samples")
    return samples * sample_width


def check_frame(
    data: bytes, sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2
) -> None:
    """Raise ProtocolError unless ``data`` is exactly one frame."""
    expected = frame_bytes(sample_rate, frame_ms, sample_width)
    if len(data) != expected:
        kind = "PCM16" if sample_width == 2 else f"{8 * sample_width}-bit"
        raise ProtocolError(
            f"{kind} frame has {len(data)} bytes: expected {expected} "
            f"({frame_ms} ms at {sample_rate} Hz)"
        )


class FrameSplitter:
    """Cut a byte stream into fixed frames (20 ms by default), keeping the remainder.

    Transports deliver audio in arbitrary chunk sizes; VAD and STT want fixed frames.
    """

    def __init__(self, sample_rate: int, frame_ms: int = FRAME_MS, sample_width: int = 2) -> None:
        self.sample_rate = sample_rate
        self.frame_ms = frame_ms
        self.frame_size = frame_bytes(sample_rate, frame_ms, sample_width)
        self._pending = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held back until the next push completes a frame."""
        return len(self._pending)

    def push(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Append ``data``; return every complete frame, in order."""
        self._pending += data
        whole = len(self._pending) - len(self._pending) % self.frame_size
        frames = [
            bytes(self._pending[i : i + self.frame_size]) for i in range(0, whole, self.frame_size)
        ]
        del self._pending[:whole]
        return frames

    def flush(self, pad: bool = True) -> bytes | None:
        """Return the remainder as a last frame (zero-padded if ``pad``), or None if empty."""
        if not self._pending:
            return None
        rest = bytes(self._pending)
        self._pending.clear()
        return rest.ljust(self.frame_size, b"\x00") if pad else rest


# -- WAV files ----------------------------------------------------------------------------


class PcmAudio(NamedTuple):
    """Mono PCM16 audio with its sample rate."""

    pcm16: bytes
    sample_rate: int

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return len(self.pcm16) / 2 / self.sample_rate


def read_wav(source: str | Path | BinaryIO) -> PcmAudio:
    """Read a mono 16-bit WAV file (stereo is mixed down)."""
    name = str(source) if isinstance(source, str | Path) else getattr(source, "name", "<stream>")
    try:
        with wave.open(source if not isinstance(source, Path) else str(source), "rb") as wav:
            channels, width, rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
            raw = wav.readframes(wav.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"{name}: not a readable PCM WAV file ({exc})") from exc
    if width != 2:
        raise ValueError(f"{name}: WAV has {8 * width}-bit samples; expected 16-bit PCM")
    samples = pcm16_to_int16(raw)
    if channels > 1:
        mixed = samples.reshape(-1, channels).astype(np.int32).mean(axis=1)
        samples = np.rint(mixed).astype(np.int16)
    return PcmAudio(int16_to_pcm16(samples), rate)


def write_wav(target: str | Path | BinaryIO, pcm16: bytes, sample_rate: int) -> None:
    """Write mono PCM16 to a WAV file."""
    pcm16_to_int16(pcm16)  # validate before creating the file
    with wave.open(target if not isinstance(target, Path) else str(target), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm16)


def wav_bytes(pcm16: bytes, sample_rate: int) -> bytes:
    """Return a complete WAV file in memory."""
    buffer = io.BytesIO()
    write_wav(buffer, pcm16, sample_rate)
    return buffer.getvalue()


# -- Level --------------------------------------------------------------------------------


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
