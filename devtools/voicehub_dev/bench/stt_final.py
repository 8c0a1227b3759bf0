"""`voicehub bench --only stt_final`: how long after the caller stops the offline
recognizer's final transcript comes (the recognizer's share of voice-to-voice latency).

Requests of the phone bench's set (`phone_eval`: Piper and the flite voices, wideband and
through the phone path) are pushed in real time, 20 ms a frame, into a recognizer stream and
a Silero VAD stream (the desks' VAD settings: speech ends after 0.35 s of silence). At the
VAD's end of speech the stream is flushed, as the pipeline engine does, and the final is
awaited. Two delays per request:

- `after_end_of_turn_ms`: the flush (the VAD's end of speech) to the final;
- `after_speech_ms`: the end of the caller's speech (the VAD's, its silence duration back
  from its end-of-speech event) to the final: the recognizer's part of voice-to-voice.

Three Whisper variants, interleaved request by request in one window (the machine is
shared): `at_flush` (how it decoded before: the whole utterance once the turn ended),
`ahead` (shipped: decoded at the caller's pause, on one core, on Whisper's own 30 s window),
and `ahead_20s_window` (the same with the encoder on a 20 s window, `whisper_window`).
Medians and 90th percentiles; per request, the decodings run (decoding ahead may decode at
a pause the caller then spoke on after) and their time on the decoding thread; the
machine's load average with them.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from typing import Any

SILENCE_AFTER = 1.2  # seconds of silence pushed after each request
_FRAME = 0.02


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    from voicehub.voice.providers.offline.whisper_engine import WhisperRecognizer
    from voicehub.voice.providers.offline.whisper_stt import WhisperSTT, WindowSettings
    from voicehub_dev.bench.phone import phone_band
    from voicehub_dev.bench.phone_eval import samples

    chosen = [s for s in samples(quick) if s.tool][:: 4 if quick else 3]
    # Each its own model and queue: their decodings are counted apart.
    variants = {
        "at_flush": WhisperSTT(
            recognizer=WhisperRecognizer(), window=WindowSettings(decode_ahead=False)
        ),
        "ahead": WhisperSTT(recognizer=WhisperRecognizer()),
        "ahead_20s_window": WhisperSTT(recognizer=WhisperRecognizer(window=20)),
    }
    for stt in variants.values():
        stt.prewarm()
    vad = _vad()
    delays: dict[str, dict[str, list[float]]] = {
        name: {"after_end_of_turn_ms": [], "after_speech_ms": []} for name in variants
    }
    load_before = os.getloadavg()[0]
    for sample in chosen:
        for audio, rate in ((sample.pcm16, 16000), (phone_band(sample.pcm16), 8000)):
            for name, stt in variants.items():
                measured = await _one_request(stt, vad, audio, rate)
                if measured is not None:
                    for key, value in measured.items():
                        delays[name][key].append(value)
    requests = 2 * len(chosen)
    work = {name: stt.recognizer.queue.stats() for name, stt in variants.items()}
    return {
        "stt_final": {
            name: {key: _spread(values) for key, values in figures.items()}
            | {
                "decodings_per_request": round(work[name].jobs / requests, 2),
                "decoding_ms_per_request": round(work[name].busy_seconds / requests * 1000),
            }
            for name, figures in delays.items()
        }
        | {
            "requests": requests,
            "vad": "silero, min_silence_duration 0.35 s, flush at its end of speech",
            "load_average_1m": {"start": load_before, "end": os.getloadavg()[0]},
        }
    }


def _vad() -> Any:
    from voicehub.voice.providers.offline import load_vad

    return load_vad("silero")


async def _one_request(stt: Any, vad: Any, audio: bytes, rate: int) -> dict[str, float] | None:
    """Push `audio` and trailing silence in real time; the two delays, or None if the VAD
    heard no end of speech."""
    from livekit import rtc
    from livekit.agents import stt as lk_stt
    from livekit.agents import vad as lk_vad

    stream, speech = stt.stream(), vad.stream()
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[tuple[float, float]] = loop.create_future()  # (flushed, speech end)
    final: asyncio.Future[float] = loop.create_future()

    async def watch_vad() -> None:
        async for event in speech:
            if event.type == lk_vad.VADEventType.END_OF_SPEECH and not ended.done():
                now = time.perf_counter()
                stream.flush()
                ended.set_result((now, now - event.silence_duration))

    async def watch_stt() -> None:
        async for event in stream:
            is_final = event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT
            if is_final and ended.done() and not final.done():
                final.set_result(time.perf_counter())

    watchers = [asyncio.create_task(watch_vad()), asyncio.create_task(watch_stt())]
    size = int(rate * _FRAME) * 2
    padded = audio + bytes(int(SILENCE_AFTER * rate) * 2)
    started = time.perf_counter()
    try:
        for index, offset in enumerate(range(0, len(padded) - size + 1, size)):
            frame = rtc.AudioFrame(padded[offset : offset + size], rate, 1, size // 2)
            stream.push_frame(frame)
            speech.push_frame(frame)
            await asyncio.sleep(max(0.0, started + (index + 1) * _FRAME - time.perf_counter()))
        if not ended.done():
            return None
        flushed, speech_end = ended.result()
        finished = await asyncio.wait_for(final, timeout=30)
        return {
            "after_end_of_turn_ms": (finished - flushed) * 1000,
            "after_speech_ms": (finished - speech_end) * 1000,
        }
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await stream.aclose()
        await speech.aclose()


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p90": 0.0}
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
    }
