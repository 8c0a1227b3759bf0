"""The evaluation set of the `phone` bench: research-desk requests a new caller might say,
in several synthetic voices, heard wideband (16 kHz) and through the phone path.

Phrasings are not those of the desk's own tests; voices: Piper (joe), eSpeak NG, and
Debian's flite voices (slt, awb, rms) when the `flite` program is installed. Each request
counts when the desk's scripted front agent, given the transcript, picks the expected tool
with the expected topic word in its arguments. Things a caller says that ask for no tool
(`UNRELATED`) count the other way: a tool called for one of them is a false trigger.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from collections.abc import Callable
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
    "I will look at it later",
    "what about the weekend",
    "how old is your company",
    "I found my keys in the car",
    "where do you get your data",
    "the weather is nice today",
    "she is still at work",
    "we had dinner at eight",
    "how are you doing today",
    "let me think about it",
]

# Added after the second listening's speed was chosen and its topic check designed, and
# measured once, to see whether what was chosen on the set above holds on phrasings and
# near-misses it was not chosen on.
FRESH_REQUESTS: list[tuple[str, str, str]] = [
    ("can you research smart meters", "delegate_workers", "meter"),
    ("please look into heat pumps for me", "delegate_workers", "heat"),
    ("I want you to find out about electric cars", "delegate_workers", "car"),
    ("could you dig into wind turbines", "delegate_workers", "wind"),
    ("read up on recycling please", "delegate_workers", "recycl"),
    ("look into hydro power", "delegate_workers", "hydro"),
    ("any news", "check_tasks", ""),
    ("what is the status", "check_tasks", ""),
    ("is there any update", "check_tasks", ""),
    ("cancel that please", "cancel_task", ""),
    ("oh never mind that", "cancel_task", ""),
    ("what are heat pumps", "search_knowledge", "heat"),
    ("what is insulation", "search_knowledge", "insulation"),
    ("what are led lights", "search_knowledge", "led"),
    ("what is hydro power", "search_knowledge", "hydro"),
]
FRESH_UNRELATED: list[str] = [
    "what if we try again tomorrow",
    "I read about it in the paper",
    "looking forward to the weekend",
    "I could not find the door",
    "the dog is looking at me",
    "how was your weekend",
    "what a lovely day",
    "it is going to be cold",
    "my car is in the garage",
    "please hold on a moment",
]

# Written before the desk-vocabulary correction of transcripts (`vocabulary_correction`)
# was built, and not looked at while its threshold was chosen on the parts above: the
# honest held-out figure of that correction. Same tools and mix as `FRESH_REQUESTS`,
# topics from the research desk's knowledge file; the unrelated utterances include
# near-misses holding topic-like words ("lights", "heating", "river") or trigger-like ones
# ("looking", "find out", "status") that ask for nothing.
FRESH2_REQUESTS: list[tuple[str, str, str]] = [
    ("I need you to research recycling", "delegate_workers", "recycl"),
    ("go and look into batteries for me", "delegate_workers", "batter"),
    ("I'd like to find out more about led lights", "delegate_workers", "led"),
    ("dig into hydro power for me please", "delegate_workers", "hydro"),
    ("can someone read up on insulation", "delegate_workers", "insulation"),
    ("do some research on solar panels", "delegate_workers", "solar"),
    ("any news yet", "check_tasks", ""),
    ("so what's the status", "check_tasks", ""),
    ("give me an update please", "check_tasks", ""),
    ("actually, cancel it", "cancel_task", ""),
    ("no, forget it", "cancel_task", ""),
    ("what's a home battery", "search_knowledge", "batter"),
    ("what are smart meters", "search_knowledge", "meter"),
    ("what's recycling", "search_knowledge", "recycl"),
    ("so what are wind turbines", "search_knowledge", "wind"),
]
FRESH2_UNRELATED: list[str] = [
    "the lights in the hall are flickering",
    "my heating bill went up this winter",
    "I'm just looking around",
    "we found out too late",
    "the river was high after the rain",
    "is it cold outside",
    "where did I put the battery charger",
    "let me check my calendar",
    "my brother installed a new kitchen",
    "thank you, goodbye",
]

# Written before the sound-alike first word, the prompt and slot changes of issue 9's third
# accuracy pass were measured on any audio, and measured only with what that pass kept: its
# held-out figure (every part above had been looked at by then, `fresh2`'s misses included).
# Not in the headline figures, which stay the four parts above (comparable across passes).
FRESH3_REQUESTS: list[tuple[str, str, str]] = [
    ("could you research led lights for me", "delegate_workers", "led"),
    ("please dig into smart meters", "delegate_workers", "meter"),
    ("I want to find out about recycling", "delegate_workers", "recycl"),
    ("can you look into electric cars please", "delegate_workers", "car"),
    ("read up on wind turbines for me", "delegate_workers", "wind"),
    ("research hydro power please", "delegate_workers", "hydro"),
    ("how's it going", "check_tasks", ""),
    ("any update yet", "check_tasks", ""),
    ("are they done now", "check_tasks", ""),
    ("never mind, thanks", "cancel_task", ""),
    ("cancel the research", "cancel_task", ""),
    ("what are batteries", "search_knowledge", "batter"),
    ("what is recycling", "search_knowledge", "recycl"),
    ("what's a wind turbine", "search_knowledge", "wind"),
    ("so what is hydro power", "search_knowledge", "hydro"),
]
FRESH3_UNRELATED: list[str] = [
    "what a mess",
    "my solar charger is broken",
    "I'm reading a book about cars",
    "the wind is strong today",
    "can you hear me now",
    "I have a question for you",
    "we recycle our bottles",
    "how is your day going",
    "that is all, thank you",
    "the meter reader came today",
]

HALVES = ("tuning", "held_out", "fresh", "fresh2")
"""`tuning`: the even phrasings of `REQUESTS` and `UNRELATED`, what thresholds and
settings are chosen on; `held_out`: their odd phrasings; `fresh`: `FRESH_REQUESTS` and
`FRESH_UNRELATED`; `fresh2`: `FRESH2_REQUESTS` and `FRESH2_UNRELATED`. The headline
figures are all four together."""

PARTS = (*HALVES, "fresh3")
"""Every part of the set: `HALVES` and `fresh3` (`FRESH3_REQUESTS`, `FRESH3_UNRELATED`),
which is reported on its own."""

FLITE_VOICES = ("slt", "awb", "rms")


@dataclass(frozen=True)
class Sample:
    words: str
    tool: str  # "" for an unrelated utterance: no tool may be called
    needle: str
    voice: str
    pcm16: bytes  # 16 kHz
    half: str  # one of PARTS


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


def phrasings(quick: bool) -> list[tuple[str, str, str, str]]:
    """(words, tool, needle, part) of every request, then every unrelated utterance, then
    the fresh3 part (quick: every fourth request, every fifth unrelated utterance, every
    fifth of fresh3)."""
    listed: list[tuple[str, str, str, str]] = []
    for index, (words, tool, needle) in enumerate(REQUESTS):
        listed.append((words, tool, needle, HALVES[index % 2]))
    listed += [(words, tool, needle, "fresh") for words, tool, needle in FRESH_REQUESTS]
    listed += [(words, tool, needle, "fresh2") for words, tool, needle in FRESH2_REQUESTS]
    for index, words in enumerate(UNRELATED):
        listed.append((words, "", "", HALVES[index % 2]))
    listed += [(words, "", "", "fresh") for words in FRESH_UNRELATED]
    listed += [(words, "", "", "fresh2") for words in FRESH2_UNRELATED]
    step_requests, step_unrelated = (4, 5) if quick else (1, 1)
    requests = [p for p in listed if p[1]][::step_requests]
    unrelated = [p for p in listed if not p[1]][::step_unrelated]
    # The fresh3 part last: eSpeak NG says a sentence differently after others, so the
    # parts before it keep the audio they had before it was added.
    fresh3 = [(words, tool, needle, "fresh3") for words, tool, needle in FRESH3_REQUESTS]
    fresh3 += [(words, "", "", "fresh3") for words in FRESH3_UNRELATED]
    return [*requests, *unrelated, *fresh3[:: 5 if quick else 1]]


@functools.cache
def samples(quick: bool) -> tuple[Sample, ...]:
    """Every phrasing (`phrasings`) in every voice (quick: two voices), synthesized once per
    process: eSpeak NG says a sentence differently after it has said others, so each
    recognizer compared in one run must hear the same audio."""
    chosen = list(voices().items())[:2] if quick else list(voices().items())
    return tuple(
        Sample(words, tool, needle, name, speak(words), half)
        for name, speak in chosen
        for words, tool, needle, half in phrasings(quick)
    )
