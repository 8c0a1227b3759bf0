"""The evaluation set of the `turns` bench: requests with pauses inside them, complete
requests, and acknowledgements, stop words and noises to play over the agent's speech.

Requests go to the example desks (research, drafting, frontdesk, report, triage). Each
phrasing marks its hesitation with " | " and where it falls: after the request's verb
("could you research | heat pumps": the words so far wait for a topic), after a function
word ("find out about | wind turbines"), inside the subject ("heat | pumps") or before a
polite tail ("heat pumps | for me please"). The voice says the phrasing with a comma there
(a speaker's continuing intonation), and the comma's gap in the audio is then replaced by
the pause: 0.3 to 1.2 s, in turn over the phrasings. A voice that leaves no gap at the
comma says the two halves apart, spliced (counted in `spliced`).

Voices: those of the phone bench (`phone_eval.voices`): Piper (the joe voice), eSpeak NG
(en-us), and Debian's flite voices slt, awb and rms when the `flite` program is installed
(`make bench` installs it). Noises are made
here, from seeded random numbers: a cough, a knock, a burst of static. Every clip is
synthesized once and cached as a WAV file (eSpeak NG says a sentence differently after
others: the cache keeps each round hearing the same audio).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from voicehub.voice.audio import read_wav, write_wav
from voicehub_dev.bench.phone_eval import voices

RATE = 16000
PAUSES = (0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.2)
_CACHE_VERSION = "1"

WORKERS, LOOP = "delegate_workers", "delegate_loop"
# (desk, words with " | " at the pause, where the pause falls, tool, a word its arguments
# hold ("" for none))
PAUSED_REQUESTS: list[tuple[str, str, str, str, str]] = [
    ("research", "could you research | heat pumps for me please", "verb", WORKERS, "heat"),
    ("research", "I would like you to | look into solar panels", "function", WORKERS, "solar"),
    ("research", "please find out about | wind turbines", "function", WORKERS, "wind"),
    ("research", "can you dig into | home insulation", "verb", WORKERS, "insulation"),
    ("research", "research | electric cars please", "verb", WORKERS, "car"),
    ("research", "what is | a smart meter", "verb", "search_knowledge", "meter"),
    ("research", "could you look into | hydro power for me", "verb", WORKERS, "hydro"),
    ("research", "read up on | recycling please", "verb", WORKERS, "recycl"),
    ("research", "look into heat | pumps for me", "subject", WORKERS, "pump"),
    ("research", "research solar panels | for me please", "tail", WORKERS, "solar"),
    ("drafting", "could you write a note about | electric cars", "function", LOOP, "car"),
    ("drafting", "please draft something on | heat pumps", "function", LOOP, "heat"),
    ("drafting", "could you write a short note about | home batteries", "function", LOOP, "batter"),
    ("drafting", "write about solar | panels please", "subject", LOOP, "panel"),
    ("frontdesk", "could you research | the price of heat pumps", "verb", "delegate", "heat"),
    ("frontdesk", "I would like you to write on | solar panels", "function", "delegate", "solar"),
    ("frontdesk", "please look into | electric cars for me", "verb", "delegate", "car"),
    ("frontdesk", "can you write about | wind turbines", "function", "delegate", "wind"),
    ("report", "could you write a report about | heat pumps", "function", "start_report", "heat"),
    ("report", "I need a report on | solar panels please", "function", "start_report", "solar"),
    ("report", "please find out about | batteries", "function", WORKERS, "batter"),
    ("report", "make me a report on wind | turbines", "subject", "start_report", "turbine"),
    ("triage", "my internet is | not working", "verb", "", ""),
    ("triage", "the phone line has | no signal", "verb", "", ""),
    ("triage", "my router | does not work any more", "subject", "", ""),
]  # fmt: skip

# (desk, words, tool, a word its arguments hold): said in one go.
COMPLETE_REQUESTS: list[tuple[str, str, str, str]] = [
    ("research", "could you research heat pumps for me please", "delegate_workers", "heat"),
    ("research", "what are solar panels", "search_knowledge", "solar"),
    ("research", "are they done yet", "check_tasks", ""),
    ("drafting", "please write a note about electric cars", "delegate_loop", "car"),
    ("frontdesk", "can you look into wind turbines", "delegate", "wind"),
    ("report", "could you write a report about batteries", "start_report", "batter"),
    ("triage", "my internet is not working", "", ""),
    ("research", "please find out about recycling", "delegate_workers", "recycl"),
]  # fmt: skip

BACKCHANNELS = ("uh-huh", "yeah", "okay", "right", "mm-hm", "go on")
STOP_WORDS = ("stop", "wait", "hold on", "no")
NOISES = ("cough", "knock", "static")


@dataclass(frozen=True)
class Speech:
    """A caller clip: 16 kHz PCM16, and where its voiced stretches end."""

    pcm16: bytes
    voice: str
    words: str


@dataclass(frozen=True)
class PausedRequest:
    desk: str
    words: str  # without the pause mark
    before: str  # the words before the pause
    position: str
    pause: float
    tool: str
    needle: str
    voice: str
    pcm16: bytes
    spliced: bool


@dataclass(frozen=True)
class CompleteRequest:
    desk: str
    words: str
    tool: str
    needle: str
    voice: str
    pcm16: bytes


def cache_dir() -> Path:
    """Where synthesized clips are kept (`VOICEHUB_BENCH_CACHE`, or the temp folder)."""
    chosen = os.environ.get("VOICEHUB_BENCH_CACHE")
    folder = Path(chosen) if chosen else Path(tempfile.gettempdir()) / "voicehub-bench-turns"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def spoken(voice: str, text: str) -> bytes:
    """`text` in `voice` (16 kHz PCM16), from the cache or synthesized into it."""
    key = hashlib.sha256(f"{_CACHE_VERSION}\0{voice}\0{text}".encode()).hexdigest()[:24]
    path = cache_dir() / f"{key}.wav"
    if path.is_file():
        return read_wav(path).pcm16
    pcm16 = voices()[voice](text)
    temporary = path.with_suffix(".tmp")
    write_wav(temporary, pcm16, RATE)
    temporary.replace(path)
    return pcm16


def with_pause(voice: str, marked: str, pause: float) -> tuple[bytes, bool]:
    """`marked` ("could you research | heat pumps") said by `voice` with `pause` seconds of
    silence at the mark, and whether the halves had to be spliced (see the module)."""
    before, after = (part.strip() for part in marked.split("|"))
    pcm16 = spoken(voice, f"{before}, {after}")
    samples = np.frombuffer(pcm16, dtype="<i2")
    gap = _comma_gap(samples, len(before) / (len(before) + len(after) + 2))
    silence = np.zeros(round(pause * RATE), dtype=np.int16)
    if gap is not None:
        start, end = gap
        joined = np.concatenate([samples[:start], silence, samples[end:]])
        return joined.astype("<i2").tobytes(), False
    first = np.frombuffer(spoken(voice, before), dtype="<i2")
    second = np.frombuffer(spoken(voice, after), dtype="<i2")
    head, tail = _voiced_span(first), _voiced_span(second)
    joined = np.concatenate([first[: head[1]], silence, second[tail[0] :]])
    return joined.astype("<i2").tobytes(), True


def _frame_levels(samples: np.ndarray, hop: int) -> np.ndarray:
    count = len(samples) // hop
    frames = samples[: count * hop].astype(np.float64).reshape(count, hop)
    return np.asarray(np.sqrt((frames * frames).mean(axis=1)), dtype=np.float64)


def _voiced_span(samples: np.ndarray) -> tuple[int, int]:
    """First and past-last sample of the stretch within 40 dB of the loudest 10 ms."""
    hop = RATE // 100
    levels = _frame_levels(samples, hop)
    loud = np.flatnonzero(levels > levels.max() / 100)
    return int(loud[0]) * hop, (int(loud[-1]) + 1) * hop


def _comma_gap(samples: np.ndarray, expected: float) -> tuple[int, int] | None:
    """The quiet stretch (30 dB below the loudest 10 ms, at least 60 ms) nearest to where
    the comma should fall (`expected`, a share of the voiced span), as sample offsets."""
    hop = RATE // 100
    levels = _frame_levels(samples, hop)
    quiet = levels < levels.max() / 31.6
    loud = np.flatnonzero(~quiet)
    first, last = int(loud[0]), int(loud[-1])
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for index in range(first, last + 1):
        if quiet[index] and start is None:
            start = index
        elif not quiet[index] and start is not None:
            if index - start >= 6:
                runs.append((start, index))
            start = None
    if not runs:
        return None
    target = first + expected * (last - first)
    start, end = min(runs, key=lambda run: abs((run[0] + run[1]) / 2 - target))
    if abs((start + end) / 2 - target) > 0.3 * (last - first):
        return None  # no gap where the comma is: a pause inside a word would be found
    return start * hop, end * hop


def noise(kind: str, seed: int = 7) -> bytes:
    """A caller-side noise, 16 kHz PCM16: "cough" (a burst of breath noise shaped like a
    cough), "knock" (a low, fast-decaying thud) or "static" (a crackle of white noise)."""
    rng = np.random.default_rng(seed)
    if kind == "cough":
        length = round(0.35 * RATE)
        t = np.arange(length) / RATE
        envelope = np.minimum(t / 0.01, 1.0) * np.exp(-t / 0.09)
        sound = _band(rng.standard_normal(length), 300, 3500) * envelope * 8000
    elif kind == "knock":
        length = round(0.12 * RATE)
        t = np.arange(length) / RATE
        sound = _band(rng.standard_normal(length), 80, 800) * np.exp(-t / 0.02) * 20000
        sound = np.concatenate([sound, np.zeros(round(0.15 * RATE)), sound])
    elif kind == "static":
        sound = rng.standard_normal(round(0.25 * RATE)) * 3000
    else:
        raise ValueError(f"unknown noise {kind!r}; known: {', '.join(NOISES)}")
    return bytes(np.clip(sound, -32768, 32767).astype("<i2").tobytes())


def _band(signal: np.ndarray, low: float, high: float) -> np.ndarray:
    spectrum = np.fft.rfft(signal)
    freqs = np.fft.rfftfreq(len(signal), 1 / RATE)
    spectrum[(freqs < low) | (freqs > high)] = 0
    return np.asarray(np.fft.irfft(spectrum, len(signal)), dtype=np.float64)


def paused_requests(quick: bool) -> list[PausedRequest]:
    """Every phrasing with a pause in every voice (quick: the first two voices, every
    third phrasing); the pause cycles through `PAUSES` over phrasings and voices."""
    chosen = list(voices())[:2] if quick else list(voices())
    phrasings = PAUSED_REQUESTS[::3] if quick else PAUSED_REQUESTS
    items: list[PausedRequest] = []
    for v, voice in enumerate(chosen):
        for p, (desk, marked, position, tool, needle) in enumerate(phrasings):
            pause = PAUSES[(p + v * 3) % len(PAUSES)]
            pcm16, spliced = with_pause(voice, marked, pause)
            words = " ".join(marked.replace("|", " ").split())
            before = marked.split("|")[0].strip()
            items.append(
                PausedRequest(
                    desk, words, before, position, pause, tool, needle, voice, pcm16, spliced
                )
            )
    return items


def complete_requests(quick: bool) -> list[CompleteRequest]:
    """Every complete request in every voice (quick: two voices, half the requests)."""
    chosen = list(voices())[:2] if quick else list(voices())
    requests = COMPLETE_REQUESTS[::2] if quick else COMPLETE_REQUESTS
    return [
        CompleteRequest(desk, words, tool, needle, voice, spoken(voice, words))
        for voice in chosen
        for desk, words, tool, needle in requests
    ]


@functools.cache
def overlap_clips(quick: bool) -> dict[str, list[tuple[str, str, bytes]]]:
    """What callers say or make over the agent's speech, by kind ("backchannel", "stop",
    "noise"): (voice or "noise", words or noise name, 16 kHz PCM16)."""
    chosen = list(voices())[:2] if quick else list(voices())
    backchannels = BACKCHANNELS[::2] if quick else BACKCHANNELS
    return {
        "backchannel": [(v, w, spoken(v, w)) for v in chosen for w in backchannels],
        "stop": [(v, w, spoken(v, w)) for v in chosen[:2] for w in STOP_WORDS],
        "noise": [("noise", kind, noise(kind)) for kind in NOISES],
    }
