"""`voicehub bench --only phone`: the cost of the phone codec, and tool choice on phone audio.

- `codec_us_per_frame`: decode 20 ms of caller mu-law and upsample it to 16 kHz, plus
  downsample 20 ms of agent audio and encode it (what `TwilioMediaTransport` does per frame).
- `tool_accuracy` / `tool_accuracy_wideband`: requests to the research desk, spoken by
  Piper, eSpeak and flite, recognized at 16 kHz (wideband) or after the phone path (8 kHz,
  300-3400 Hz, mu-law) by Whisper tiny.en biased to the desk's vocabulary (the headline
  figures: the window of speech a Whisper stream would decode, cut by its speech gate from
  the request between silences) and by PocketSphinx (under `pocketsphinx`, for comparison),
  then answered by the desk's scripted front agent; a request counts when the agent picks
  the expected tool with the expected topic word. Whisper listens to audio heard as no
  request, or as one about none of the desk's topics, a second time, slowed and primed with
  the desk's requests as sentences (`whisper_relisten`). Under `halves`: the set's tuning
  and held-out halves (what settings are chosen on, and the rest), fresh phrasings (written
  before, and measured once after, the second listening was chosen) and `fresh2` (written
  before the vocabulary correction was built) and `fresh3` (written before the third pass of
  changes, the sound-alike trigger words and what followed, was measured: its held-out
  figure, reported on its own); the headline figures are the first four parts together.
- `false_trigger_rate` / `false_trigger_rate_wideband`: the share of unrelated utterances
  (chatter, near-misses of trigger phrases) for which the agent called a tool.
- `stt_ms_per_request`, `stt_cpu_ms_per_request`: median wall and CPU time of recognizing
  one request; `stt_cpu_ms_per_unrelated`: the same for an unrelated utterance (Whisper
  listens to those twice); `stt_cpu_ms_mean`: the CPU's mean over both.

The evaluation set (several voices, phrasings the desk's tests do not use, unrelated
utterances) is `voicehub_dev.bench.phone_eval`.
"""

from __future__ import annotations

import asyncio
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.voice.audio import (
    Resampler,
    int16_to_pcm16,
    lin2ulaw,
    pcm16_to_int16,
    resample_pcm16,
    ulaw2lin,
)


def codec_cost(frames: int) -> float:
    """Microseconds per 20 ms frame for both directions of the phone path."""
    up, down = Resampler(8000, 16000), Resampler(16000, 8000)
    rng = np.random.default_rng(1)
    caller = lin2ulaw(int16_to_pcm16(rng.integers(-8000, 8000, 160)))
    agent = int16_to_pcm16(rng.integers(-8000, 8000, 320))
    started = time.perf_counter()
    for _ in range(frames):
        up.push(pcm16_to_int16(ulaw2lin(caller)))
        lin2ulaw(int16_to_pcm16(down.push(pcm16_to_int16(agent))))
    return (time.perf_counter() - started) / frames * 1e6


NOISE_SNR_DB = 10.0
"""The noisy phone band's speech-to-noise ratio."""


def noisy(pcm16: bytes, snr_db: float = NOISE_SNR_DB, seed: int = 7) -> bytes:
    """`pcm16` with pink noise (power falling as 1/f) added `snr_db` below the speech's
    power (the same noise for the same seed)."""
    speech = pcm16_to_int16(pcm16).astype(np.float64)
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(speech.size))
    spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
    spectrum[0] = 0
    pink = np.fft.irfft(spectrum, speech.size)
    power = float(np.mean(speech**2)) or 1.0
    pink *= np.sqrt(power / (float(np.mean(pink**2)) * 10 ** (snr_db / 10)))
    mixed = np.clip(speech + pink, -32768, 32767).astype(np.int16)
    return int16_to_pcm16(mixed)


def phone_band(pcm16: bytes) -> bytes:
    """16 kHz speech as it arrives from a phone: 8 kHz, 300-3400 Hz, through mu-law."""
    narrow = pcm16_to_int16(resample_pcm16(pcm16, 16000, 8000)).astype(np.float64)
    spectrum = np.fft.rfft(narrow)
    freqs = np.fft.rfftfreq(len(narrow), 1 / 8000)
    spectrum[(freqs < 300) | (freqs > 3400)] = 0
    band = np.clip(np.fft.irfft(spectrum, len(narrow)), -32768, 32767).astype(np.int16)
    return ulaw2lin(lin2ulaw(int16_to_pcm16(band)))


Recognizer = Callable[[bytes, int], str]


def recognizers(rules: list[Any], topics: list[str]) -> dict[str, Recognizer]:
    """The offline STTs a desk can choose, biased as a desk with these rules and topics
    biases them (`voicehub.desks.vocabulary`: topics, then the trigger phrases of rules that
    call a tool; audio heard as no request is listened to again, slowed; what is heard is
    corrected to the desk's topics, `vocabulary_correction`). Under `whisper-once`,
    Whisper without the second listening or the correction, for comparison."""
    from voicehub.agents.scripted import ScriptedLLM, example_requests, rule_vocabulary
    from voicehub.voice.providers.offline import transcribe
    from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
    from voicehub.voice.providers.offline.whisper_engine import (
        sentences_prompt,
        shared_recognizer,
        vocabulary_prompt,
    )
    from voicehub.voice.providers.offline.whisper_relisten import Relisten

    front = ScriptedLLM(rules)
    prompt = vocabulary_prompt(topics + rule_vocabulary(front.rules, tools_only=True))
    relisten = Relisten(
        is_request=front.calls_tool,
        topics=tuple(topics),
        asks_about=front.tool_arguments,
        prompt=sentences_prompt(example_requests(front.rules, topics)),
    )
    correction = VocabularyCorrection(topics=tuple(topics))
    whisper = shared_recognizer()

    def by_whisper(pcm16: bytes, rate: int) -> str:
        return whisper.recognize(
            pcm16, rate, prompt=prompt, relisten=relisten, correction=correction
        ).text

    def as_streamed(pcm16: bytes, rate: int) -> str:
        window = streamed_window(pcm16, rate)
        if window is None:
            return ""
        audio, window_rate = window
        return by_whisper(audio, window_rate)

    def by_whisper_once(pcm16: bytes, rate: int) -> str:
        return whisper.recognize(pcm16, rate, prompt=prompt).text

    return {
        "whisper": as_streamed,
        "whisper-whole": by_whisper,
        "whisper-once": by_whisper_once,
        "pocketsphinx": transcribe,
        "moonshine": _streamed(moonshine_plugin(front, topics, second_opinion=False).hear),
        "auto": _streamed(moonshine_plugin(front, topics, second_opinion=True).hear),
    }


def moonshine_plugin(front: Any, topics: list[str], *, second_opinion: bool) -> Any:
    """Moonshine as `stt = "moonshine"` (corrected to the desk's topics) or as `stt = "auto"`
    builds it (and Whisper, primed and relistening, as its second opinion) for a desk with
    `front`'s rules and `topics`, built the way `voicehub.desks.vocabulary` builds them."""
    from voicehub.agents.scripted import example_requests, rule_vocabulary
    from voicehub.voice.providers.offline import WhisperSTT
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion
    from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
    from voicehub.voice.providers.offline.whisper_engine import sentences_prompt
    from voicehub.voice.providers.offline.whisper_relisten import Relisten

    relisten = Relisten(
        is_request=front.calls_tool,
        topics=tuple(topics),
        asks_about=front.tool_arguments,
        prompt=sentences_prompt(example_requests(front.rules, topics)),
    )
    correction = VocabularyCorrection(topics=tuple(topics))
    second = None
    if second_opinion:
        whisper = WhisperSTT(
            vocabulary=topics + rule_vocabulary(front.rules, tools_only=True),
            relisten=relisten,
            correction=correction,
        )
        second = SecondOpinion(whisper, relisten)
    return MoonshineSTT(second_opinion=second, correction=correction)


def _streamed(hear: Callable[..., Any]) -> Recognizer:
    """`hear` given what a stream decodes of a request (`streamed_window`)."""

    def recognize(pcm16: bytes, rate: int) -> str:
        window = streamed_window(pcm16, rate)
        if window is None:
            return ""
        text: str = hear(*window).text
        return text

    return recognize


def streamed_window(pcm16: bytes, rate: int) -> tuple[bytes, int] | None:
    """What a Whisper stream decodes of a caller saying `pcm16` between half a second of
    silence and the VAD's end of speech: the window its speech gate cuts (`utterance_window`,
    with the stream's settings), and its rate."""
    from voicehub.voice.providers.offline.speech_gate import SpeechGate
    from voicehub.voice.providers.offline.utterance_window import window_of
    from voicehub.voice.providers.offline.whisper_stt import WindowSettings

    settings = WindowSettings()
    gate = SpeechGate(rate)
    quiet = bytes(2 * rate // 2)
    frames, speech = gate.decide_all(quiet + pcm16 + quiet)
    window = window_of(frames, speech, pre_roll=settings.pre_roll, tail=settings.tail)
    return None if window is None else (window.audio, gate.rate)


def tool_accuracy(quick: bool, stt: str = "whisper") -> dict[str, Any]:
    """Tool accuracy on the evaluation set (`voicehub_dev.bench.phone_eval`), phone and wideband,
    overall (the whole set), per voice and per part (tuning, held-out, fresh), with the
    requests that went wrong; the false-trigger rate (a tool called for an unrelated
    utterance); and the STT's time per request (wall and CPU of this process, median, and
    the CPU's mean: a second listening costs only some requests)."""
    from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
    from voicehub.agents.scripted import ScriptedLLM
    from voicehub_dev.bench.phone_eval import HALVES, PARTS, samples

    # The research desk's front agent and knowledge, read from its files (bench sits below
    # `desks`).
    with (Path("channels") / "research.toml").open("rb") as file:
        front = tomllib.load(file)["agents"][0]["scripted"]
    with (Path("channels") / "knowledge" / "research.toml").open("rb") as file:
        topics = [entry["topic"] for entry in tomllib.load(file)["entries"]]
    recognize = recognizers(front["rules"], topics)[stt]
    llm = ScriptedLLM(front["rules"], fallback=front.get("fallback", ""))
    tools = ("delegate_workers", "check_tasks", "cancel_task", "search_knowledge")
    specs = [ToolSpec(name=name) for name in tools]
    right: Counter[tuple[str, str, str]] = Counter()  # (half, band, voice)
    total: Counter[tuple[str, str]] = Counter()  # (half, voice)
    triggered: Counter[tuple[str, str]] = Counter()  # (half, band): tools for unrelated ones
    unrelated: Counter[str] = Counter()  # half
    misses: list[str] = []
    walls: list[float] = []  # requests
    cpus: dict[bool, list[float]] = {True: [], False: []}  # is a request -> CPU times
    recognize(bytes(3200), 16000)  # load the model outside the timings
    for sample in samples(quick):
        if sample.tool:
            total[sample.half, sample.voice] += 1
        else:
            unrelated[sample.half] += 1
        for band, audio, rate in (
            ("wide", sample.pcm16, 16000),
            ("phone", phone_band(sample.pcm16), 8000),
            ("noisy", phone_band(noisy(sample.pcm16)), 8000),
        ):
            wall, cpu = time.perf_counter(), time.process_time()
            heard = recognize(audio, rate)
            if band != "noisy":  # the times are of the clean bands, as before
                if sample.tool:
                    walls.append(time.perf_counter() - wall)
                cpus[bool(sample.tool)].append(time.process_time() - cpu)
            chunks = llm.respond([ChatMessage(role="user", content=heard)], specs)
            calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
            where = f"{band} {sample.voice} ({sample.half})"
            if not sample.tool:
                if calls:
                    triggered[sample.half, band] += 1
                    misses.append(
                        f"{where}: unrelated {sample.words!r} heard as {heard!r} "
                        f"called {calls[0].name}"
                    )
            elif (
                calls
                and calls[0].name == sample.tool
                and sample.needle in calls[0].arguments.lower()
            ):
                right[sample.half, band, sample.voice] += 1
            else:
                misses.append(f"{where}: {sample.words!r} heard as {heard!r}")

    def share(halves: tuple[str, ...], band: str, voice: str | None = None) -> float:
        hits = sum(
            n for (h, b, v), n in right.items() if h in halves and b == band and voice in (None, v)
        )
        count = sum(n for (h, v), n in total.items() if h in halves and voice in (None, v))
        return round(hits / max(count, 1), 3)

    def false_rate(halves: tuple[str, ...], band: str) -> float:
        hits = sum(triggered[h, band] for h in halves)
        return round(hits / max(sum(unrelated[h] for h in halves), 1), 3)

    headline = HALVES
    voices = sorted({v for _, v in total})
    return {
        "stt": stt,
        "tool_accuracy": share(headline, "phone"),
        "tool_accuracy_wideband": share(headline, "wide"),
        "tool_accuracy_noisy_phone": share(headline, "noisy"),
        "false_trigger_rate": false_rate(headline, "phone"),
        "false_trigger_rate_wideband": false_rate(headline, "wide"),
        "stt_ms_per_request": round(float(np.median(walls)) * 1000, 1),
        "stt_cpu_ms_per_request": round(float(np.median(cpus[True])) * 1000, 1),
        "stt_cpu_ms_per_unrelated": round(float(np.median(cpus[False])) * 1000, 1),
        "stt_cpu_ms_mean": round(float(np.mean(cpus[True] + cpus[False])) * 1000, 1),
        "requests": sum(n for (h, _), n in total.items() if h in headline),
        "unrelated": sum(unrelated[h] for h in headline),
        "halves": {
            half: {
                "phone": share((half,), "phone"),
                "wide": share((half,), "wide"),
                "false_trigger_rate": false_rate((half,), "phone"),
                "false_trigger_rate_wideband": false_rate((half,), "wide"),
                "requests": sum(n for (h, _), n in total.items() if h == half),
                "unrelated": unrelated[half],
            }
            for half in PARTS
        },
        "voices": {
            v: {"phone": share(headline, "phone", v), "wide": share(headline, "wide", v)}
            for v in voices
        },
        "misses": misses,
    }


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    codec = codec_cost(2_000 if quick else 20_000)
    # The default phone STT gives the headline figures; PocketSphinx's are for comparison.
    accuracy = await asyncio.to_thread(tool_accuracy, quick, "whisper")
    sphinx = await asyncio.to_thread(tool_accuracy, quick, "pocketsphinx")
    keep = (
        "tool_accuracy",
        "tool_accuracy_wideband",
        "false_trigger_rate",
        "false_trigger_rate_wideband",
        "stt_ms_per_request",
        "stt_cpu_ms_per_request",
        "stt_cpu_ms_per_unrelated",
        "stt_cpu_ms_mean",
        "misses",
    )
    return {
        "phone": {
            "codec_us_per_frame": round(codec, 1),
            **accuracy,
            "pocketsphinx": {key: sphinx[key] for key in keep},
        }
    }
