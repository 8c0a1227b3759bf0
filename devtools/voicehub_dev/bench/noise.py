"""`voicehub bench --only noise --only noise_accuracy`: what RNNoise (`[voice] denoise`) buys
on noisy phone calls, and what it costs.

- `us_per_frame`, `us_per_frame_wideband`: one 20 ms caller frame through `RNNoiseFilter` at
  8 kHz (phone) and 16 kHz: resampling to 48 kHz and back and two RNNoise frames;
  `rnnoise_us_per_10ms`: RNNoise's own frame alone (the wheel's library is plain C, no SIMD).
- `accuracy` (section `noise_accuracy`): the phone bench's evaluation (`phone_eval`, the
  research desk's requests and unrelated chatter in the offline voices, through the phone
  path, recognized by the streamed Whisper and answered by the desk's scripted agent) with
  background noise mixed in
  (`noise_mix`: babble, street, car) at 10 and 0 dB SNR against the talker, before the phone
  path, as a phone's microphone hears it; with half a second of that noise before and after
  the words. For each condition, `off` and `rnnoise`: `tool_accuracy` (the expected tool with
  the expected topic) and `false_trigger_rate` (a tool called for chatter). `clean` is the
  same set without noise.
- `false_barge_ins`: noise alone (eight seconds of each kind, at the level it has at each
  SNR against the set's median talker) into the call's Silero VAD, as a caller holding the
  line in a car or a street: `vad_starts_per_min` (speech starts the engine would weigh as
  the caller taking the floor) and `voiced_share` (frames the per-frame speech evidence
  counts as the caller's, which hold a result back), off and with RNNoise.
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
MODES = ("off", "rnnoise")
LEAD = 0.5  # seconds of noise before and after the words


def denoise_cost(frames: int) -> dict[str, float]:
    """Microseconds per 20 ms frame through the filter (8 and 16 kHz) and per RNNoise frame."""
    from voicehub.voice.denoise.rnnoise_library import RNNoiseState
    from voicehub.voice.denoise.stream import RNNoiseFilter

    rng = np.random.default_rng(1)
    figures: dict[str, float] = {}
    for key, rate in (("us_per_frame", 8000), ("us_per_frame_wideband", 16000)):
        f = RNNoiseFilter(rate)
        frame = int16_to_pcm16(rng.integers(-6000, 6000, rate // 50))
        for _ in range(20):
            f.process(frame)
        started = time.perf_counter()
        for _ in range(frames):
            f.process(frame)
        figures[key] = round((time.perf_counter() - started) / frames * 1e6, 1)
        f.close()
    state = RNNoiseState()
    block = rng.integers(-6000, 6000, state.frame_size).astype(np.int16)
    started = time.perf_counter()
    for _ in range(frames):
        state.process(block)
    figures["rnnoise_us_per_10ms"] = round((time.perf_counter() - started) / frames * 1e6, 1)
    state.close()
    return figures


def _through(mode: str, samples: np.ndarray) -> bytes:
    """8 kHz caller audio as the engine's intake gives it to the VAD and the recognizer."""
    from voicehub.voice.denoise import caller_filter

    pcm = int16_to_pcm16(samples[: len(samples) // FRAME * FRAME])
    intake = caller_filter("rnnoise" if mode == "rnnoise" else "off", RATE)
    if intake is None:
        return pcm
    size = 2 * FRAME
    out = b"".join(intake.process(pcm[i : i + size]) for i in range(0, len(pcm), size))
    intake.close()
    return out


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
            for mode in MODES:
                heard = recognize(_through(mode, audio), RATE)
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
            for mode in MODES:
                pcm = _through(mode, line)
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


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `noise` section: the cost and the false barge-ins (a few minutes)."""
    cost = denoise_cost(300 if quick else 2000)
    barge = await false_barge_ins(quick)
    return {"denoise": {**cost, "false_barge_ins": barge}}


async def run_accuracy(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `noise_accuracy` section: the phone evaluation in noise, on and off (long: every
    utterance is heard 14 times)."""
    scores = await asyncio.to_thread(accuracy, quick)
    return {"denoise": {"accuracy": scores}}
