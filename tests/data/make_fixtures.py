"""Makes the suite's speech fixtures (tests/data/*.flac) and their manifest.

    .venv/bin/python tests/data/make_fixtures.py          # writes the files and manifest.json
    .venv/bin/python tests/data/make_fixtures.py --check  # the files match the manifest

Each fixture is `text` said by Piper or eSpeak NG (eSpeak in a fresh process per utterance:
its C library says a sentence differently after others), at `rate` Hz, in one of the forms
`tests.support.speech.Fixture` describes, stored as 16-bit mono FLAC (lossless) with the
sha256 of its PCM in manifest.json. Tests read them through `tests.support.speech.spoken`.
Re-running this script on another machine makes slightly different audio (Piper's
arithmetic differs by CPU): that is why its output is committed, and why a fixture is
re-made only when a test needs new or changed speech (then check that the model tests
still pass with their margins, and commit the files and manifest together).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.speech import DATA, MANIFEST, Fixture, manifest, pcm_sha256, read_pcm16  # noqa: E402


@dataclass(frozen=True, slots=True)
class Speech:
    text: str
    voice: str = "piper"
    rate: int = 16000
    form: str = "plain"


def said(*texts: str, voice: str = "piper", rate: int = 16000, form: str = "plain") -> list[Speech]:
    return [Speech(text, voice, rate, form) for text in texts]


HESITATIONS = (
    "I would like you to, um, research electric cars",
    "I want to know more about, heat pumps",
    "so what I really want is, a report on heat pumps",
)

FIXTURES: list[Speech] = [
    # the callers' requests and answers of desk, engine and server tests (Piper, 16 kHz)
    *said(
        "could you research heat pumps for me please",
        "could you research heat pumps",
        "could you research",
        "heat pumps for me please",
        "could you write a report about heat pumps please",
        "please write a short note about electric cars",
        "please research solar panels",
        "please find out about",
        "wind turbines",
        "could you dig into heat pumps for me",
        "could you help me please",
        "what is the weather tomorrow",
        "what is the weather like tomorrow",
        "what are your opening hours",
        "book me a table for two at seven tonight",
        "I have a question about my invoice",
        "my internet is broken",
        "my internet is down",
        "internet",
        "it still does not work",
        "that fixed it",
        "from paris",
        "the phone one",
        "banana",
        "hello there",
        "hello there, how are you",
        "hold on a moment",
        "stop stop please",
        "wait, one more question about my order",
        "the analysts are looking into heat pumps now",
        "my neighbour has a new dog",
        "thank you, and while they work, let me tell you about my old house, "
        "it gets very cold in the winter",
    ),
    # the soak's callers (voicehub_dev.soak.caller)
    *said(
        *(
            f"could you research {topic} for me please"
            for topic in ("solar panels", "wind turbines", "electric cars")
        ),
        "is there any update",
        "any news",
        "thank you very much",
        "thank you, and while they work, let me tell you about my old house",
    ),
    # short words an overlap must take for speech, not noise
    *said("yeah", "okay", "mm-hm", "uh-huh", "yes", "no", "stop", "wait", "hold on"),
    # other rates the transports and recognizers resample from
    *said("please research solar panels", rate=8000),
    *said("please research solar panels", rate=22050),
    *said("please research solar panels", rate=24000),
    *said("please research solar panels", rate=48000),
    *said("could you dig into heat pumps for me", rate=8000),
    *said("could you help me please", rate=8000),
    *said("could you help me please", rate=24000),
    *said("hello there", rate=8000),
    *said("what is the weather tomorrow", rate=8000),
    *said("what is the weather tomorrow", rate=24000),
    # Smart Turn: requests cut at their hesitation, and whole (chosen for wide margins from
    # the policy's threshold with AVX-512 and with AVX2 arithmetic alike)
    *said(*HESITATIONS),
    *said(*HESITATIONS, form="before_comma"),
    # Whisper's second listening (eSpeak NG, which Whisper mishears more than Piper)
    *said("please find out about wind turbines", "what is a smart meter", voice="espeak"),
    *said(
        "please find out about wind turbines",
        "my neighbour has a new dog",
        voice="espeak",
        rate=8000,
        form="phone",
    ),
    *said("could you dig into heat pumps for me", rate=8000, form="phone"),
]


def synthesized(text: str, voice: str, rate: int) -> bytes:
    if voice == "piper":
        from voicehub.voice.providers.offline import synthesize

        return synthesize(text, voice="piper", sample_rate=rate)
    if voice != "espeak":
        raise ValueError(f"voice {voice!r}: expected 'piper' or 'espeak'")
    code = (
        "import sys; from voicehub.voice.providers.offline import synthesize; "
        "sys.stdout.buffer.write("
        "synthesize(sys.argv[1], voice='espeak', sample_rate=int(sys.argv[2])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, text, str(rate)], capture_output=True, check=True, timeout=120
    )
    return done.stdout


def before_comma(pcm16: bytes, rate: int) -> bytes:
    """The words before the longest quiet stretch inside the speech (where the comma was):
    10 ms frames quieter than the loudest by 30 dB are quiet."""
    audio = np.frombuffer(pcm16, dtype="<i2").astype(np.float64)
    hop = rate // 100
    frames = audio[: len(audio) // hop * hop].reshape(-1, hop)
    levels = np.sqrt((frames * frames).mean(axis=1))
    quiet = levels < levels.max() / 31.6
    loud = np.flatnonzero(~quiet)
    best, start = (0, 0), None
    for index in range(int(loud[0]), int(loud[-1]) + 1):
        if quiet[index] and start is None:
            start = index
        elif not quiet[index] and start is not None:
            best = max(best, (index - start, start))
            start = None
    if best == (0, 0):
        raise ValueError("no pause inside the speech to cut at")
    return pcm16[: best[1] * hop * 2]


def made(spec: Speech) -> bytes:
    if spec.form == "plain":
        return synthesized(spec.text, spec.voice, spec.rate)
    if spec.form == "phone":
        from voicehub_dev.bench.phone import phone_band

        if spec.rate != 8000:
            raise ValueError(f"{spec}: the phone form is 8000 Hz")
        return phone_band(synthesized(spec.text, spec.voice, 16000))
    if spec.form == "before_comma":
        return before_comma(
            synthesized(spec.text.replace("|", ","), spec.voice, spec.rate), spec.rate
        )
    raise ValueError(f"{spec}: form {spec.form!r}: expected plain, phone or before_comma")


def file_name(spec: Speech) -> str:
    """speech/<voice>-<rate>-<form>-<the text's words>.flac; a long text is cut to 40
    characters and told apart by a hash of the whole."""
    slug = re.sub(r"[^a-z0-9]+", "-", spec.text.lower()).strip("-")
    if len(slug) > 40:
        slug = slug[:40].rstrip("-") + "-" + hashlib.sha256(spec.text.encode()).hexdigest()[:8]
    return f"speech/{spec.voice}-{spec.rate}-{spec.form}-{slug}.flac"


def write() -> None:
    entries = []
    names: set[str] = set()
    for spec in FIXTURES:
        name = file_name(spec)
        if name in names:
            raise ValueError(f"two fixtures would share {name}: make their texts differ")
        names.add(name)
        pcm16 = made(spec)
        path = DATA / name
        path.parent.mkdir(parents=True, exist_ok=True)
        samples = np.frombuffer(pcm16, dtype="<i2")
        soundfile.write(path, samples, spec.rate, format="FLAC", subtype="PCM_16")
        entries.append(
            asdict(Fixture(name, spec.text, spec.voice, spec.rate, spec.form, pcm_sha256(pcm16)))
        )
        print(f"{name}: {len(samples) / spec.rate:.2f} s")
    for stale in (DATA / "speech").glob("*.flac"):
        if str(stale.relative_to(DATA)) not in names:
            stale.unlink()
    MANIFEST.write_text(json.dumps({"fixtures": entries}, indent=1) + "\n")


def check() -> None:
    for fixture in manifest().values():
        read_pcm16(fixture)
    print(f"{len(manifest())} fixtures match {MANIFEST}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the files")
    if parser.parse_args().check:
        check()
    else:
        write()
