"""The evaluation set of the `phone` bench: research-desk requests a new caller might say,
in several synthetic voices, heard wideband (16 kHz) and through the phone path.

Phrasings are not those of the desk's own tests; voices: Piper (joe), eSpeak NG, and
Debian's flite voices (slt, awb, rms) when the `flite` program is installed. Each request
counts when the desk's scripted front agent, given the transcript, picks the expected tool
with the expected topic word in its arguments. Things a caller says that ask for no tool
(`UNRELATED`) count the other way: a tool called for one of them is a false trigger.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from voicehub.voice.audio import read_wav, resample_pcm16

# (words, expected tool, a word the tool's arguments must hold, or "")
REQUESTS: list[tuple[str, str, str]] = [
    ("I would like you to research heat pumps", "delegate_workers", "heat"),
    ("could you look into solar panels for me", "delegate_workers", "solar"),
    ("please find out about wind turbines", "delegate_workers", "wind"),
    ("can you dig into home insulation", "delegate_workers", "insulation"),
    ("research home batteries please", "delegate_workers", "batter"),
    ("would you read up on electric cars", "delegate_workers", "car"),
    ("how is it going", "check_tasks", ""),
    ("any update on that", "check_tasks", ""),
    ("are they done yet", "check_tasks", ""),
    ("never mind", "cancel_task", ""),
    ("forget it", "cancel_task", ""),
    ("please stop the research", "cancel_task", ""),
    ("what is a heat pump", "search_knowledge", "heat"),
    ("what are solar panels", "search_knowledge", "solar"),
    ("what is a smart meter", "search_knowledge", "meter"),
]

# Said to the desk but asking for no tool: chatter, and near-misses of its trigger phrases
# ("looked at", "what if", "find my"), which tolerant matching must not take for requests.
UNRELATED: list[str] = [
    "hello, can you hear me",
    "thanks, that is all for today",
    "who am I talking to",
    "I will call you back later",
    "my neighbour has a new dog",
    "sorry, I did not catch that",
    "I looked at it yesterday",
    "what if it rains tomorrow",
    "I cannot find my glasses",
    "is this the right number",
]

FLITE_VOICES = ("slt", "awb", "rms")


@dataclass(frozen=True)
class Sample:
    words: str
    tool: str  # "" for an unrelated utterance: no tool may be called
    needle: str
    voice: str
    pcm16: bytes  # 16 kHz


def voices() -> dict[str, Callable[[str], bytes]]:
    """Name -> text to 16 kHz PCM16, for every voice available here."""
    from voicehub.voice.providers.offline import synthesize

    found: dict[str, Callable[[str], bytes]] = {
        "piper": lambda text: synthesize(text, voice="piper", sample_rate=16000),
        "espeak": lambda text: synthesize(text, voice="espeak", sample_rate=16000),
    }
    flite = shutil.which("flite")
    if flite is not None:
        for name in FLITE_VOICES:
            found[f"flite-{name}"] = _flite(flite, name)
    return found


def _flite(program: str, voice: str) -> Callable[[str], bytes]:
    def speak(text: str) -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "speech.wav"
            subprocess.run(
                [program, "-voice", voice, "-t", text, "-o", str(target)],
                check=True,
                capture_output=True,
                timeout=60,
            )
            audio = read_wav(target)
        return resample_pcm16(audio.pcm16, audio.sample_rate, 16000)

    return speak


def samples(quick: bool) -> Iterator[Sample]:
    """Every request and unrelated utterance in every voice (quick: four requests, two
    unrelated utterances, two voices)."""
    requests = REQUESTS[::4] if quick else REQUESTS
    unrelated = UNRELATED[::5] if quick else UNRELATED
    chosen = list(voices().items())[:2] if quick else list(voices().items())
    for name, speak in chosen:
        for words, tool, needle in [*requests, *((words, "", "") for words in unrelated)]:
            yield Sample(words, tool, needle, name, speak(words))
