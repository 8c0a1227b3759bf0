"""Audio figures: the streaming resampler's speed, quality and latency.

Signals: Piper speech and a log sine sweep, band-limited to 85% of the lower Nyquist of each
rate pair, so that an ideal resampler would reproduce them exactly. The reference is exact:
the sweep is evaluated analytically at the output instants, and the speech is resampled by
truncating or zero-padding its spectrum (an ideal brick-wall filter). So the SNR counts only
the resampler's own error: passband ripple, leaked stopband, rounding (int16 rounding of
the output alone caps it near 90-100 dB at these levels).

- ``resample_us_per_frame``: CPU per 20 ms input frame, streaming speech frame by frame
  (best of a few rounds, since the machine may be shared).
- ``resample_snr_db``: error against the reference, away from the signal's ends.
- ``resample_stopband_db``: suppression of a tone the output cannot represent: when
  downsampling, a tone at 0.6 x the new rate (above its Nyquist, so it would alias); when
  upsampling, the image above the old Nyquist of a tone at 0.4 x the old rate. int16
  rounding caps the measurable figure near 90 dB.
- ``resample_delay_samples``: lag of the output behind the reference (0: aligned).
- ``resample_held_ms``: how much pushed input has no output yet, while streaming 20 ms
  frames (mean and max): the latency the resampler adds to a call.

When the ``soxr`` package is importable the same figures are measured for soxr's HQ
streaming resampler, under ``soxr_hq``, for comparison.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voicehub.voice.audio.pcm import Int16Array, float_to_int16, pcm16_to_int16
from voicehub.voice.audio.resample import Resampler

Float64Array = npt.NDArray[np.float64]

RATE_PAIRS = [(8000, 16000), (16000, 8000), (22050, 16000), (24000, 16000), (48000, 16000)]
SPEECH_TEXT = (
    "Thanks for calling. Your order shipped this morning and should arrive on Thursday. "
    "Is there anything else I can help you with?"
)
SPEECH_RATE = 22050  # Piper's own rate
BAND = 0.85  # signals stay below 85% of the lower Nyquist: inside every passband
EDGE_S = 0.05  # the ends, where signals start and stop abruptly, are left out of the SNR
AMPLITUDE = 0.5  # of full scale, for the sweep and the stopband tones
ROUNDING_RMS = 1 / math.sqrt(12)  # rms of int16 rounding noise, in LSB
NEAR, FAR = 0.04, 0.2  # stopband tones: 4% and 20% past the Nyquist they must not cross


class Stream(Protocol):
    def push(self, samples: npt.ArrayLike) -> Int16Array: ...
    def flush(self) -> Int16Array: ...


StreamFactory = Callable[[int, int], Stream]


def pair_name(from_rate: int, to_rate: int) -> str:
    def short(rate: int) -> str:
        return f"{rate / 1000:g}k"

    return f"{short(from_rate)}_to_{short(to_rate)}"


def stream_through(
    factory: StreamFactory, samples: Int16Array, rates: tuple[int, int]
) -> Int16Array:
    """Resample ``samples`` pushed 20 ms at a time, then flushed."""
    stream = factory(*rates)
    frame = rates[0] // 50
    parts = [stream.push(samples[i : i + frame]) for i in range(0, len(samples), frame)]
    return np.concatenate([*parts, stream.flush()])


def ideal_resample(samples: npt.ArrayLike, from_rate: int, to_rate: int) -> Float64Array:
    """Brick-wall resampling through the spectrum (the length must be whole at both rates)."""
    values = np.asarray(samples, dtype=np.float64)
    n_out = len(values) * to_rate // from_rate
    spectrum = np.fft.rfft(values)
    kept = min(len(spectrum), n_out // 2)  # the Nyquist bin is dropped: no content there
    resized = np.zeros(n_out // 2 + 1, dtype=np.complex128)
    resized[:kept] = spectrum[:kept]
    return np.fft.irfft(resized, n_out) * (n_out / len(values))


def band_limited(samples: npt.ArrayLike, rate: int, cutoff_hz: float) -> Float64Array:
    values = np.asarray(samples, dtype=np.float64)
    spectrum = np.fft.rfft(values)
    spectrum[np.fft.rfftfreq(len(values), 1 / rate) > cutoff_hz] = 0
    return np.fft.irfft(spectrum, len(values))


def snr_db(output: npt.ArrayLike, reference: npt.ArrayLike, rate: int) -> float:
    edge = int(EDGE_S * rate)
    ref = np.asarray(reference, dtype=np.float64)[edge:-edge]
    error = np.asarray(output, dtype=np.float64)[edge:-edge] - ref
    return round(10 * math.log10(np.sum(ref * ref) / max(np.sum(error * error), 1e-9)), 1)


def delay_samples(output: npt.ArrayLike, reference: npt.ArrayLike, rate: int) -> int:
    """The lag (within +-50 samples) at which the output best matches the reference."""
    edge, out = int(EDGE_S * rate), np.asarray(output, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)[edge:-edge]
    lags = range(-50, 51)
    scores = [float(np.dot(out[edge + lag : edge + lag + len(ref)], ref)) for lag in lags]
    return lags[int(np.argmax(scores))]


def sweep(rate: int, seconds: float, top_hz: float) -> Float64Array:
    """A log sine sweep from 100 Hz to ``top_hz``, in sample units, at ``rate``."""
    t = np.arange(int(rate * seconds)) / rate
    growth = math.log(top_hz / 100.0)
    phase = 2 * np.pi * 100.0 * seconds / growth * (np.exp(t * growth / seconds) - 1)
    return AMPLITUDE * 32767 * np.sin(phase)


def speech(seconds_min: float = 0.0) -> tuple[Int16Array, int]:
    """Piper speech padded with silence to whole seconds, so every rate has whole samples."""
    from voicehub.voice.providers.offline import synthesize

    samples = pcm16_to_int16(synthesize(SPEECH_TEXT, "piper", SPEECH_RATE))
    seconds = max(math.ceil(len(samples) / SPEECH_RATE + 0.2), math.ceil(seconds_min))
    padded = np.zeros(seconds * SPEECH_RATE, dtype=np.int16)
    start = (len(padded) - len(samples)) // 2
    padded[start : start + len(samples)] = samples
    return padded, seconds


def stopband_db(factory: StreamFactory, from_rate: int, to_rate: int, beyond: float) -> float:
    """Suppression of a tone ``beyond`` (a fraction) past the Nyquist it must not cross."""
    t = np.arange(from_rate) / from_rate  # one second
    edge = int(EDGE_S * to_rate)
    # Downsampling: the tone is above the new Nyquist (it would alias). Upsampling: the
    # tone's image lands above the old Nyquist.
    freq = (1 + beyond) * to_rate / 2 if to_rate < from_rate else (1 - beyond) * from_rate / 2
    tone = float_to_int16(AMPLITUDE * np.sin(2 * np.pi * freq * t))
    out = stream_through(factory, tone, (from_rate, to_rate))[edge:-edge].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(out * np.hanning(len(out)))) ** 2
    above = np.fft.rfftfreq(len(out), 1 / to_rate) > min(from_rate, to_rate) / 2
    if to_rate < from_rate:
        leaked = float(np.sqrt(np.mean(out * out)))
        kept = AMPLITUDE * 32768 / math.sqrt(2)
    else:
        leaked = math.sqrt(float(spectrum[above].sum()) / float(spectrum.sum())) * audio_rms(out)
        kept = audio_rms(out)
    # Leaks below int16 rounding round to silence: count them as rounding noise (1/sqrt(12)
    # LSB rms), so the figure is a floor, about 92 dB at this level.
    return round(20 * math.log10(kept / max(leaked, ROUNDING_RMS)), 1)


def audio_rms(samples: Float64Array) -> float:
    return float(np.sqrt(np.mean(samples * samples)))


def held_samples(
    factory: StreamFactory, samples: Int16Array, from_rate: int, to_rate: int
) -> list[float]:
    """After each 20 ms push: output samples owed for the input so far but not yet returned."""
    stream, frame = factory(from_rate, to_rate), from_rate // 50
    produced, held = 0, []
    for start in range(0, len(samples) - frame + 1, frame):
        produced += len(stream.push(samples[start : start + frame]))
        held.append((start + frame) * to_rate / from_rate - produced)
    return held


def us_per_frame(
    factory: StreamFactory, samples: Int16Array, rates: tuple[int, int], rounds: int
) -> float:
    frames = len(samples) // (rates[0] // 50)
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        stream_through(factory, samples, rates)
        best = min(best, time.perf_counter() - started)
    return round(best / frames * 1e6, 1)


def measure(
    factory: StreamFactory, master: Int16Array, seconds: int, rounds: int
) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "resample_us_per_frame": {},
        "resample_snr_db": {"speech": {}, "sweep": {}},
        "resample_stopband_db": {"near": {}, "far": {}},
        "resample_delay_samples": {},
        "resample_held_ms": {"mean": {}, "max": {}},
        "resample_held_samples_max": {},
    }
    for from_rate, to_rate in RATE_PAIRS:
        name, rates = pair_name(from_rate, to_rate), (from_rate, to_rate)
        top = BAND * min(from_rate, to_rate) / 2
        # Speech at the input rate, band-limited; its ideal resampling is the reference.
        spoken = band_limited(master, SPEECH_RATE, top)
        source = float_to_int16(ideal_resample(spoken, SPEECH_RATE, from_rate) / 32768)
        reference = ideal_resample(source, from_rate, to_rate)
        out = stream_through(factory, source, rates)
        figures["resample_snr_db"]["speech"][name] = snr_db(out, reference, to_rate)
        figures["resample_delay_samples"][name] = delay_samples(out, reference, to_rate)
        tone_in = float_to_int16(sweep(from_rate, 2.0, top) / 32768)
        tone_out = stream_through(factory, tone_in, rates)
        figures["resample_snr_db"]["sweep"][name] = snr_db(
            tone_out, sweep(to_rate, 2.0, top), to_rate
        )
        for where, beyond in (("near", NEAR), ("far", FAR)):
            stopband = stopband_db(factory, from_rate, to_rate, beyond)
            figures["resample_stopband_db"][where][name] = stopband
        held = held_samples(factory, source, from_rate, to_rate)
        figures["resample_held_samples_max"][name] = round(max(held), 1)
        for key, value in (("mean", float(np.mean(held))), ("max", max(held))):
            figures["resample_held_ms"][key][name] = round(value * 1000 / to_rate, 1)
        figures["resample_us_per_frame"][name] = us_per_frame(factory, source, rates, rounds)
    figures["resample_signal_seconds"] = seconds
    return figures


class SoxrStream:
    """soxr's HQ streaming resampler behind the same push/flush interface."""

    def __init__(self, from_rate: int, to_rate: int) -> None:
        import soxr

        self._stream = soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32", quality="HQ")

    def push(self, samples: npt.ArrayLike) -> Int16Array:
        return self._convert(np.asarray(samples, dtype=np.float32), last=False)

    def flush(self) -> Int16Array:
        return self._convert(np.zeros(0, dtype=np.float32), last=True)

    def _convert(self, samples: npt.NDArray[np.float32], last: bool) -> Int16Array:
        out = np.asarray(self._stream.resample_chunk(samples, last=last), dtype=np.float64)
        return np.clip(np.rint(out), -32768, 32767).astype(np.int16)


def soxr_available() -> bool:
    try:
        import soxr  # noqa: F401
    except ImportError:
        return False
    return True


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `audio` section: about 10 s (`quick` does fewer timing rounds)."""
    del store  # no store involved
    started = time.perf_counter()
    master, seconds = speech()
    rounds = 2 if quick else 7
    figures = measure(Resampler, master, seconds, rounds)
    figures["resampler"] = Resampler.__doc__.splitlines()[0] if Resampler.__doc__ else "?"
    if soxr_available():
        figures["soxr_hq"] = measure(SoxrStream, master, seconds, rounds)
    figures["quick"] = quick
    figures["section_seconds"] = round(time.perf_counter() - started, 1)
    return {"audio": figures}
