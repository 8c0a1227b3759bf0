"""The bundled sounds, synthesized: `python -m voicehub.voice.sounds.synth` writes them to
`data/` (16 kHz PCM16 WAV). Made here from sine tones and seeded noise, so they carry the
project's licence and nothing is downloaded; a test checks the files are what this makes.

- `soft-pulse`: two soft bell notes (E5, then B4), then quiet; a 2.4 s loop.
- `keys`: typing on a keyboard: short clicks of band-limited noise (1-3.4 kHz, heard on a
  phone line too) in bursts of a few keys; a 3 s loop.
- `hold-music`: a slow chord loop (C, A minor, F, G; two seconds each) with a light
  arpeggio over it; an 8 s loop whose end meets its start.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicehub.voice.audio import int16_to_pcm16, write_wav

__all__ = ["DATA", "RATE", "SYNTHS", "synthesize"]

RATE = 16000
DATA = Path(__file__).resolve().parent / "data"

Floats = npt.NDArray[np.float64]


def _t(seconds: float) -> Floats:
    return np.arange(int(seconds * RATE)) / RATE


def _bell(freq: float, seconds: float) -> Floats:
    t = _t(seconds)
    attack = np.minimum(1.0, t / 0.01)
    tone = np.sin(2 * np.pi * freq * t) + 0.25 * np.sin(2 * np.pi * 2 * freq * t)
    return tone * attack * np.exp(-t / 0.12)


def soft_pulse() -> Floats:
    out = np.zeros(int(2.4 * RATE))
    for start, freq in ((0.0, 659.25), (0.55, 493.88)):
        note = _bell(freq, 0.5)
        i = int(start * RATE)
        out[i : i + len(note)] += note
    return out / float(np.abs(out).max()) * 0.2  # peak -14 dBFS


def keys() -> Floats:
    rng = np.random.default_rng(20261202)
    out = np.zeros(int(3.0 * RATE))
    spectrum_freqs = np.fft.rfftfreq(160, 1 / RATE)
    band = (spectrum_freqs >= 1000) & (spectrum_freqs <= 3400)
    at = 0.05
    while at < 2.8:
        for _ in range(int(rng.integers(2, 7))):  # a burst of keys
            if at >= 2.8:
                break
            spectrum = np.fft.rfft(rng.standard_normal(160))
            spectrum[~band] = 0
            click = np.fft.irfft(spectrum, 160) * np.exp(-np.arange(160) / 24)
            i = int(at * RATE)
            out[i : i + 160] += click * rng.uniform(0.6, 1.0)
            at += rng.uniform(0.09, 0.2)
        at += rng.uniform(0.25, 0.6)  # a pause between words
    return out / float(np.abs(out).max()) * 0.18


_CHORDS = (
    (261.63, 329.63, 392.00),  # C
    (220.00, 261.63, 329.63),  # A minor
    (174.61, 220.00, 261.63),  # F
    (196.00, 246.94, 293.66),  # G
)


def hold_music() -> Floats:
    span = 2.0
    out = np.zeros(int(span * len(_CHORDS) * RATE))
    t = _t(span)
    swell = np.sin(np.pi * t / span) ** 0.5  # rises and falls within each chord: loops clean
    for index, chord in enumerate(_CHORDS):
        pad = np.zeros(len(t))
        for f in chord:
            pad += np.sin(2 * np.pi * f * t) + 0.2 * np.sin(4 * np.pi * f * t)
        section = 0.5 * pad * swell
        for step, freq in enumerate((*chord, chord[1])):  # an arpeggio, an octave up
            note = _bell(2 * freq, 0.5) * 0.6
            i = int(step * span / 4 * RATE)
            section[i : i + len(note)] += note[: len(section) - i]
        i = int(index * span * RATE)
        out[i : i + len(section)] += section
    return out / float(np.abs(out).max()) * 0.25


SYNTHS: dict[str, Callable[[], Floats]] = {
    "soft-pulse": soft_pulse,
    "keys": keys,
    "hold-music": hold_music,
}


def synthesize(name: str) -> bytes:
    """The sound `name` as 16 kHz PCM16."""
    samples = SYNTHS[name]()
    return int16_to_pcm16(np.clip(np.rint(samples * 32767), -32768, 32767).astype(np.int16))


def main() -> int:
    DATA.mkdir(exist_ok=True)
    for name in SYNTHS:
        write_wav(DATA / f"{name}.wav", synthesize(name), RATE)
        print(f"wrote {DATA / name}.wav")
    return 0


if __name__ == "__main__":
    sys.exit(main())
