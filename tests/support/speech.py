"""The committed speech the suite feeds its models: the same bytes on every machine.

Every test that gives a model (Whisper, PocketSphinx, Silero VAD, Smart Turn) caller
speech reads it here, never from a synthesizer at test time: Piper's output differs by a
few least significant bits from one CPU to another, and a model's score moves with it.
`tests/data/make_fixtures.py` made the files and `tests/data/manifest.json` holds each
one's text, voice, rate, form and the sha256 of its PCM, checked on every read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import soundfile

DATA = Path(__file__).resolve().parents[1] / "data"
MANIFEST = DATA / "manifest.json"
HOW_TO_ADD = "add it to FIXTURES in tests/data/make_fixtures.py and run that script"


class FixtureError(AssertionError):
    """A fixture is missing from the manifest, or its file is not what the manifest says."""


@dataclass(frozen=True, slots=True)
class Fixture:
    """One committed utterance: `text` said by `voice` at `rate` Hz, as `form`:
    "plain" (the synthesizer's output), "phone" (the 16 kHz speech through the phone band:
    8 kHz, 300-3400 Hz, mu-law) or "before_comma" (only the words before the longest pause,
    where the text has its comma)."""

    file: str
    text: str
    voice: str
    rate: int
    form: str
    sha256: str


@cache
def manifest() -> dict[tuple[str, str, int, str], Fixture]:
    if not MANIFEST.is_file():
        raise FixtureError(f"{MANIFEST} is missing: run tests/data/make_fixtures.py")
    entries = json.loads(MANIFEST.read_text())["fixtures"]
    fixtures = [Fixture(**entry) for entry in entries]
    return {(f.text, f.voice, f.rate, f.form): f for f in fixtures}


def pcm_sha256(pcm16: bytes) -> str:
    return hashlib.sha256(pcm16).hexdigest()


def read_pcm16(fixture: Fixture) -> bytes:
    """The fixture's 16-bit PCM, checked against its manifest hash."""
    path = DATA / fixture.file
    if not path.is_file():
        raise FixtureError(f"{path} is missing (the manifest lists it); {HOW_TO_ADD}")
    samples, rate = soundfile.read(path, dtype="int16")
    if rate != fixture.rate or samples.ndim != 1:
        raise FixtureError(
            f"{path}: {rate} Hz, shape {samples.shape}; manifest says mono {fixture.rate} Hz"
        )
    pcm16 = np.ascontiguousarray(samples, dtype="<i2").tobytes()
    if pcm_sha256(pcm16) != fixture.sha256:
        raise FixtureError(
            f"{path}: its PCM's sha256 is {pcm_sha256(pcm16)}, the manifest says "
            f"{fixture.sha256}; regenerate both with tests/data/make_fixtures.py"
        )
    return pcm16


@cache
def spoken(text: str, voice: str = "piper", rate: int = 16000, form: str = "plain") -> bytes:
    """`text` said by `voice` as 16-bit little-endian mono PCM at `rate` Hz (see `Fixture`)."""
    fixture = manifest().get((text, voice, rate, form))
    if fixture is None:
        raise FixtureError(
            f"no speech fixture for {text!r} (voice {voice!r}, {rate} Hz, form {form!r}); "
            f"{HOW_TO_ADD}"
        )
    return read_pcm16(fixture)


def floats(pcm16: bytes) -> np.ndarray:
    """16-bit PCM as float32 samples in [-1, 1)."""
    return np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
