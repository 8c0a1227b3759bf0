"""Background noise for the noise bench and the denoise fixtures, made here, not downloaded.

Three kinds a phone caller calls from, all deterministic for a seed:

- `babble`: a room of people talking. Real speech: six talkers from the offline voices (Piper
  and eSpeak NG at several speeds and pitches), each saying chatter the desks ask nothing
  of, started at different points and summed.
- `car`: a cabin at speed: engine firing harmonics (30-40 Hz fundamental, drifting), road
  rumble (brown noise, most energy below 300 Hz) and a little broadband tyre and wind hiss.
- `street`: traffic passing (lowpassed noise in slow swells), a distant babble, and now and
  then a two-tone horn.

`mix(speech, noise, snr_db)` scales the noise against the speech's active level (its frames
within 30 dB of its loudest), as speech-in-noise evaluations do, so 0 dB is noise as loud as
the talker.
"""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import numpy.typing as npt

from voicehub.voice.audio import pcm16_to_int16, resample

__all__ = ["NOISE_KINDS", "NoiseKind", "active_rms", "mix", "noise"]

NoiseKind = Literal["babble", "street", "car"]
NOISE_KINDS: tuple[NoiseKind, ...] = ("babble", "street", "car")

_CHATTER = (
    "so I told him the train was late again and he just laughed about it",
    "we should get the blue one, it looks better in the kitchen anyway",
    "did you see the match last night, they scored twice in the last minute",
    "my sister is moving to the coast next spring with the kids",
    "the coffee here is fine but the cakes are much better next door",
    "I think the meeting moved to Thursday afternoon, check your mail",
    "she bought three of them because they were on sale at the market",
    "honestly the traffic on the bridge was terrible this morning",
)

Floats = npt.NDArray[np.float64]


def noise(kind: NoiseKind, seconds: float, rate: int, seed: int = 0) -> Floats:
    """`seconds` of `kind` at `rate`, float samples at about -20 dBFS RMS."""
    n = int(seconds * rate)
    rng = np.random.default_rng(seed)
    if kind == "babble":
        signal = _babble(n, rate, rng, talkers=6)
    elif kind == "car":
        signal = _car(n, rate, rng)
    elif kind == "street":
        signal = _street(n, rate, rng)
    else:
        raise ValueError(f"noise kind {kind!r}: expected one of {', '.join(NOISE_KINDS)}")
    return _at_level(signal, -20.0)


def mix(speech: npt.ArrayLike, background: Floats, snr_db: float) -> npt.NDArray[np.int16]:
    """`speech` (int16) with `background` under it at `snr_db` against the speech's active
    level; the background loops if shorter. Clipped to int16."""
    voice = np.asarray(speech, dtype=np.float64)
    if len(background) < len(voice):
        background = np.resize(background, len(voice))
    under = background[: len(voice)]
    gain = active_rms(voice) / max(_rms(under), 1e-9) / (10 ** (snr_db / 20))
    return np.clip(np.rint(voice + gain * under), -32768, 32767).astype(np.int16)


def _rms(x: Floats) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if len(x) else 0.0


def active_rms(x: Floats, frame: int = 160) -> float:
    frames = x[: len(x) // frame * frame].reshape(-1, frame)
    if not len(frames):
        return _rms(x)
    levels = np.sqrt(np.mean(np.square(frames), axis=1))
    active = frames[levels >= levels.max() * 10 ** (-30 / 20)]
    return _rms(active.ravel())


def _at_level(x: Floats, dbfs: float) -> Floats:
    return x * (32768 * 10 ** (dbfs / 20) / max(_rms(x), 1e-9))


def _lowpass(x: Floats, rate: int, cutoff: float, order: int = 2) -> Floats:
    """A gentle lowpass in the frequency domain (`order` x 6 dB per octave above `cutoff`)."""
    spectrum = np.fft.rfft(x)
    freqs = np.fft.rfftfreq(len(x), 1 / rate)
    spectrum /= np.sqrt(1 + (freqs / cutoff) ** (2 * order))
    return np.fft.irfft(spectrum, len(x))


def _pink(n: int, rng: np.random.Generator) -> Floats:
    spectrum = np.fft.rfft(rng.standard_normal(n))
    scale = np.ones(len(spectrum))
    scale[1:] = 1 / np.sqrt(np.arange(1, len(spectrum)))
    return np.fft.irfft(spectrum * scale, n)


@functools.cache
def _talker(index: int, rate: int) -> tuple[float, ...]:
    """One talker's chatter at `rate` (synthesized once per process)."""
    from voicehub.voice.providers.offline import synthesize

    voice: Literal["piper", "espeak"] = "piper" if index % 2 == 0 else "espeak"
    lines = [_CHATTER[(index + k) % len(_CHATTER)] for k in range(4)]
    pcm = b"".join(synthesize(line, voice=voice, sample_rate=16000) for line in lines)
    samples = pcm16_to_int16(pcm)
    # Pitch and pace differ per talker: the same voice resampled a little (a slower, lower
    # or faster, higher talker).
    shift = (0.86, 1.0, 1.12, 0.93, 1.06, 0.8)[index % 6]
    speech = resample(samples, int(16000 * shift) // 10 * 10, 16000) if shift != 1.0 else samples
    if rate != 16000:
        speech = resample(speech, 16000, rate)
    return tuple(float(s) for s in speech)


def _babble(n: int, rate: int, rng: np.random.Generator, talkers: int) -> Floats:
    out = np.zeros(n)
    for index in range(talkers):
        voice = np.asarray(_talker(index, rate))
        start = int(rng.integers(0, len(voice)))
        track = np.resize(np.roll(voice, -start), n)
        out += track / max(_rms(voice), 1e-9) * rng.uniform(0.6, 1.0)
    return out


def _car(n: int, rate: int, rng: np.random.Generator) -> Floats:
    t = np.arange(n) / rate
    drift = 35 + 4 * np.sin(2 * np.pi * 0.07 * t + rng.uniform(0, 6.28))
    phase = 2 * np.pi * np.cumsum(drift) / rate
    engine = np.zeros(n)
    for k in range(1, 7):
        engine += np.sin(k * phase) / k
    rumble = _lowpass(np.cumsum(rng.standard_normal(n)), rate, 120.0, order=1)
    rumble -= _lowpass(rumble, rate, 15.0, order=2)  # no DC wander
    hiss = _lowpass(rng.standard_normal(n), rate, 1500.0, order=1)
    return _at_level(engine, -26) + _at_level(rumble, -20) + _at_level(hiss, -32)


def _street(n: int, rate: int, rng: np.random.Generator) -> Floats:
    t = np.arange(n) / rate
    traffic = _lowpass(_pink(n, rng), rate, 700.0, order=1)
    swells = np.full(n, 0.25)
    for centre in rng.uniform(0, n / rate, max(1, int(n / rate / 3))):
        swells += np.exp(-0.5 * ((t - centre) / 1.2) ** 2)
    horn = np.zeros(n)
    for start in rng.uniform(0, max(n / rate - 0.5, 0.1), max(1, int(n / rate / 8))):
        on = (t >= start) & (t < start + 0.4)
        horn[on] = np.sin(2 * np.pi * 420 * t[on]) + np.sin(2 * np.pi * 525 * t[on])
    crowd = _babble(n, rate, rng, talkers=4)
    return (
        _at_level(traffic * swells, -20)
        + _at_level(crowd, -30)
        + (_at_level(horn, -24) if horn.any() else horn)
    )
