"""`voicehub bench --only noise --only noise_accuracy`: what RNNoise (`[voice] denoise`) buys
on noisy phone calls, and what it costs.

Each mode's audio is what the engine's caller intake (`CallerAudio`) hands on: `off`, as
the line carried it; `rnnoise`, as the product runs it: the VAD and the speech evidence hear
RNNoise's output, the recognizer the line as carried; `rnnoise_words`, RNNoise heard by the
recognizer too (how it ran before: kept to show why it does not).

- `us_per_frame`, `us_per_frame_wideband`: CPU (this thread's) of one 20 ms caller frame
  through `RNNoiseFilter` at 8 kHz (phone) and 16 kHz: resampling to 48 kHz and back and two
  RNNoise frames; `us_per_frame_silence`: the same on a silent line (RNNoise skips most of
  its work there); `rnnoise_us_per_10ms`: RNNoise's own frame alone (the wheel's library is
  plain C, no SIMD).
- `accuracy` (section `noise_accuracy`): the phone bench's evaluation (`phone_eval`, the
  research desk's requests and unrelated chatter in the offline voices, through the phone
  path, recognized by the streamed Whisper and answered by the desk's scripted agent) with
  background noise mixed in
  (`noise_mix`: babble, street, car) at 10 and 0 dB SNR against the talker, before the phone
  path, as a phone's microphone hears it; with half a second of that noise before and after
  the words. For each condition and mode: `tool_accuracy` (the expected tool with the
  expected topic) and `false_trigger_rate` (a tool called for chatter). `clean` is the same
  set without noise. Audio a mode hands the recognizer unchanged is recognized once.
- `false_barge_ins`: noise alone (eight seconds of each kind, at the level it has at each
  SNR against the set's median talker) into the call's Silero VAD, as a caller holding the
  line in a car or a street: `vad_starts_per_min` (speech starts the engine would weigh as
  the caller taking the floor) and `voiced_share` (frames the per-frame speech evidence
  counts as the caller's, which hold a result back and pause the agent), `off` and
  `rnnoise` (what turn-taking hears is the same in both RNNoise modes).
- `words_heard`: the other side of it, the caller's own words in that noise (the phone
  evaluation's utterances, mixed as for `accuracy`) into the same VAD: `share` of the
  utterances in which it heard speech start (a turn the engine takes; a barge-in over the
  agent), off and with RNNoise; `clean` without noise.
"""

from __future__ import annotations

import asyncio
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.voice.audio import int16_to_pcm16, pcm16_to_int16
from voicehub_dev.bench.noise_mix import NOISE_KINDS, active_rms, noise

RATE = 8000
FRAME = RATE // 50  # samples per 20 ms
SNRS = (10.0, 0.0)
MODES = ("off", "rnnoise", "rnnoise_words")
TURN_MODES = ("off", "rnnoise")  # what the VAD hears is the same in both RNNoise modes
LEAD = 0.5  # seconds of noise before and after the words


def denoise_cost(frames: int) -> dict[str, float]:
    """CPU microseconds per 20 ms frame through the filter (8 and 16 kHz, and a silent
    8 kHz line) and per RNNoise frame: this thread's CPU time, so other work on the
    machine inflates it less than it would a wall-clock figure."""
    from voicehub.voice.denoise.rnnoise_library import RNNoiseState
    from voicehub.voice.denoise.stream import RNNoiseFilter

    rng = np.random.default_rng(1)
    figures: dict[str, float] = {}
    for key, rate, loud in (
        ("us_per_frame", 8000, True),
        ("us_per_frame_wideband", 16000, True),
        ("us_per_frame_silence", 8000, False),
    ):
        f = RNNoiseFilter(rate)
        samples = rng.integers(-6000, 6000, rate // 50) if loud else np.zeros(rate // 50)
        frame = int16_to_pcm16(samples.astype(np.int16))
        for _ in range(20):
            f.process(frame)
        started = time.thread_time()
        for _ in range(frames):
            f.process(frame)
        figures[key] = round((time.thread_time() - started) / frames * 1e6, 1)
        f.close()
    state = RNNoiseState()
    block = rng.integers(-6000, 6000, state.frame_size).astype(np.int16)
    started = time.thread_time()
    for _ in range(frames):
        state.process(block)
    figures["rnnoise_us_per_10ms"] = round((time.thread_time() - started) / frames * 1e6, 1)
    state.close()
    return figures


class _Kept:
    """Stands for a VAD or recognizer stream: keeps the PCM of the frames pushed."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def push_frame(self, frame: Any) -> None:
        self.parts.append(bytes(frame.data.cast("B")))


def _through(mode: str, samples: np.ndarray) -> tuple[bytes, bytes]:
    """8 kHz caller audio as the engine's intake (`CallerAudio`, with the filter `mode`
    names) hands it on: (what the VAD hears, what the recognizer hears)."""
    from voicehub.voice.denoise import caller_filter
    from voicehub.voice.engine.listening import CallerAudio

    pcm = int16_to_pcm16(samples[: len(samples) // FRAME * FRAME])
    intake = caller_filter("off" if mode == "off" else "rnnoise", RATE)
    caller = CallerAudio(RATE, lambda: None, intake=intake)
    vad, recognizer = _Kept(), _Kept()
    caller.feed(vad, recognizer)
    caller.push(pcm)
    caller.close()
    heard = b"".join(vad.parts)
    return heard, heard if mode == "rnnoise_words" else b"".join(recognizer.parts)


def _noisy_phone(speech16: bytes, kind: str | None, snr: float, seed: int) -> np.ndarray:
    """The words (16 kHz) with `LEAD` seconds either side, noise under all of it at `snr`
    against the words, then the phone path (8 kHz, band, mu-law)."""
    from voicehub_dev.bench.phone import phone_band

    words = pcm16_to_int16(speech16)
    quiet = np.zeros(int(LEAD * 16000), dtype=np.int16)
    padded = np.concatenate((quiet, words, quiet))
    if kind is not None:
        background = noise(kind, len(padded) / 16000, 16000, seed=seed)  # type: ignore[arg-type]
        gain = active_rms(words.astype(np.float64)) / float(np.sqrt(np.mean(background**2)))
        under = background * gain / (10 ** (snr / 20))
        padded = np.clip(np.rint(padded + under), -32768, 32767).astype(np.int16)
    return pcm16_to_int16(phone_band(int16_to_pcm16(padded)))


def accuracy(quick: bool) -> dict[str, Any]:
    """Tool accuracy and false triggers per noise, SNR and denoise mode (see the module)."""
    from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
    from voicehub.agents.scripted import ScriptedLLM
    from voicehub_dev.bench.phone import recognizers
    from voicehub_dev.bench.phone_eval import samples

    with (Path("channels") / "research.toml").open("rb") as file:
        front = tomllib.load(file)["agents"][0]["scripted"]
    with (Path("channels") / "knowledge" / "research.toml").open("rb") as file:
        topics = [entry["topic"] for entry in tomllib.load(file)["entries"]]
    recognize = recognizers(front["rules"], topics)["whisper"]
    llm = ScriptedLLM(front["rules"], fallback=front.get("fallback", ""))
    specs = [
        ToolSpec(name=name)
        for name in ("delegate_workers", "check_tasks", "cancel_task", "search_knowledge")
    ]
    recognize(bytes(3200), 16000)
    conditions: list[tuple[str, str | None, float]] = [("clean", None, 0.0)]
    conditions += [(f"{kind}_{int(snr)}db", kind, snr) for kind in NOISE_KINDS for snr in SNRS]
    right: Counter[tuple[str, str]] = Counter()
    triggered: Counter[tuple[str, str]] = Counter()
    requests = unrelated = 0
    misses: list[str] = []
    for index, sample in enumerate(samples(quick)):
        if sample.tool:
            requests += 1
        else:
            unrelated += 1
        for name, kind, snr in conditions:
            audio = _noisy_phone(sample.pcm16, kind, snr, seed=index)
            known: dict[bytes, str] = {}  # the recognizer's audio: heard once per condition
            for mode in MODES:
                _, words = _through(mode, audio)
                if words not in known:
                    known[words] = recognize(words, RATE)
                heard = known[words]
                chunks = llm.respond([ChatMessage(role="user", content=heard)], specs)
                calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
                if not sample.tool:
                    if calls:
                        triggered[name, mode] += 1
                elif (
                    calls
                    and calls[0].name == sample.tool
                    and sample.needle in calls[0].arguments.lower()
                ):
                    right[name, mode] += 1
                elif kind is not None and snr == 0.0:
                    misses.append(f"{name} {mode} {sample.voice}: {sample.words!r} -> {heard!r}")
    return {
        "requests": requests,
        "unrelated": unrelated,
        **{
            name: {
                mode: {
                    "tool_accuracy": round(right[name, mode] / max(requests, 1), 3),
                    "false_trigger_rate": round(triggered[name, mode] / max(unrelated, 1), 3),
                }
                for mode in MODES
            }
            for name, _, _ in conditions
        },
        "misses_0db": misses,
    }


async def false_barge_ins(quick: bool) -> dict[str, Any]:
    """VAD speech starts and speech-like frames on noise alone (see the module)."""
    from livekit import rtc
    from livekit.agents.vad import VADEventType

    from voicehub.voice.providers.offline import load_vad
    from voicehub.voice.speech_evidence import SpeechEvidence
    from voicehub_dev.bench.phone import phone_band
    from voicehub_dev.bench.phone_eval import samples

    talker = float(
        np.median([active_rms(pcm16_to_int16(s.pcm16).astype(np.float64)) for s in samples(quick)])
    )
    vad = load_vad("silero")
    seconds = 4.0 if quick else 8.0
    figures: dict[str, Any] = {}
    for kind in NOISE_KINDS:
        background = noise(kind, seconds, 16000, seed=99)
        for snr in SNRS:
            level = talker / float(np.sqrt(np.mean(background**2))) / (10 ** (snr / 20))
            scaled = np.clip(np.rint(background * level), -32768, 32767).astype(np.int16)
            line = pcm16_to_int16(phone_band(int16_to_pcm16(scaled)))
            row: dict[str, Any] = {}
            for mode in TURN_MODES:
                pcm, _ = _through(mode, line)
                evidence = SpeechEvidence(RATE)
                stream = vad.stream()
                starts = 0
                voiced = frames = 0
                for i in range(0, len(pcm) - 2 * FRAME + 1, 2 * FRAME):
                    chunk = pcm[i : i + 2 * FRAME]
                    frames += 1
                    voiced += bool(evidence.voiced_frames(chunk))
                    stream.push_frame(rtc.AudioFrame(chunk, RATE, 1, FRAME))
                stream.end_input()
                async for event in stream:
                    if event.type == VADEventType.START_OF_SPEECH:
                        starts += 1
                await stream.aclose()
                row[mode] = {
                    "vad_starts_per_min": round(starts * 60 / seconds, 1),
                    "voiced_share": round(voiced / max(frames, 1), 3),
                }
            figures[f"{kind}_{int(snr)}db"] = row
    return figures


async def _speech_starts(vad: Any, pcm: bytes) -> list[float]:
    """The audio times (seconds) at which `vad` heard speech start in 8 kHz `pcm`."""
    from livekit import rtc
    from livekit.agents.vad import VADEventType

    stream = vad.stream()
    for i in range(0, len(pcm) - 2 * FRAME + 1, 2 * FRAME):
        stream.push_frame(rtc.AudioFrame(pcm[i : i + 2 * FRAME], RATE, 1, FRAME))
    stream.end_input()
    starts = [
        float(event.timestamp)
        async for event in stream
        if event.type == VADEventType.START_OF_SPEECH
    ]
    await stream.aclose()
    return starts


async def words_heard(quick: bool) -> dict[str, Any]:
    """The share of the evaluation's utterances in noise in which the call's VAD heard
    speech start, off and with RNNoise (see the module)."""
    from voicehub.voice.providers.offline import load_vad
    from voicehub_dev.bench.phone_eval import samples

    vad = load_vad("silero")
    conditions: list[tuple[str, str | None, float]] = [("clean", None, 0.0)]
    conditions += [(f"{kind}_{int(snr)}db", kind, snr) for kind in NOISE_KINDS for snr in SNRS]
    heard: Counter[tuple[str, str]] = Counter()
    chosen = samples(quick)
    for index, sample in enumerate(chosen):
        for name, kind, snr in conditions:
            audio = _noisy_phone(sample.pcm16, kind, snr, seed=index)
            for mode in TURN_MODES:
                pcm, _ = _through(mode, audio)
                if await _speech_starts(vad, pcm):
                    heard[name, mode] += 1
    return {
        name: {mode: {"share": round(heard[name, mode] / len(chosen), 3)} for mode in TURN_MODES}
        for name, _, _ in conditions
    }


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `noise` section: the cost, the false barge-ins and the words the VAD still
    hears (a few minutes)."""
    cost = denoise_cost(300 if quick else 2000)
    barge = await false_barge_ins(quick)
    words = await words_heard(quick)
    return {"denoise": {**cost, "false_barge_ins": barge, "words_heard": words}}


async def run_accuracy(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `noise_accuracy` section: the phone evaluation in noise, on and off (long: every
    utterance is heard 14 times)."""
    scores = await asyncio.to_thread(accuracy, quick)
    return {"denoise": {"accuracy": scores}}
