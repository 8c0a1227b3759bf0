"""The Deepgram providers on their own, in the `cloud_pipeline` section: CPU per 20 ms frame
of `DeepgramSTT` and `DeepgramTTS`, with no voice session around them (so the figures stay
meaningful whatever engine drives the providers).

- ``stt_us_per_frame``: `count` paced listen streams (a frame per call every 20 ms, the
  caller's pattern of `cloud_pipeline`), each flushed 300 ms into every pause as an engine
  does at the end of a turn, events taken through `DirectEvents` when the stream has it
  (else read by a task, as for any livekit plugin); the pacing harness's own CPU is taken
  out. ``stt_us_per_frame_by_send_ms`` runs it with 20 ms messages too (one per frame).
- ``tts_us_per_frame``: `count` speak-socket streams, one reply after another, CPU per 20 ms
  frame of agent audio out of livekit's `SynthesizeStream`, at 16 kHz linear16 and at the
  phone's 8 kHz mu-law (``tts_us_per_frame_mulaw_8k``).

The fake Deepgram runs in a child process (`cloud_pipeline._serve_fake`): its CPU is not
counted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from voicehub_dev.bench.voice_load import HarnessCall, Window, pace

FLUSH_AFTER_FRAMES = 15  # 300 ms of quiet: where an engine ends the turn and flushes


class SttCall:
    """One Deepgram listen stream driven like a call's (the paced loop's `Call`)."""

    def __init__(self, plugin: Any, silence: bytes) -> None:
        self._plugin, self._silence = plugin, silence
        self._stream: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._quiet = 0
        self.finals = 0

    async def start(self) -> None:
        from voicehub.voice.engine.direct_events import DirectEvents

        self._stream = self._plugin.stream()
        if isinstance(self._stream, DirectEvents):
            self._stream.deliver_to(self._event)
        else:
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for event in self._stream:
            self._event(event)

    def _event(self, event: Any) -> None:
        from livekit.agents import stt

        if event.type is stt.SpeechEventType.FINAL_TRANSCRIPT and event.alternatives[0].text:
            self.finals += 1

    async def push(self, pcm16: bytes) -> None:
        from livekit import rtc

        self._stream.push_frame(rtc.AudioFrame(pcm16, 16000, 1, len(pcm16) // 2))
        self._quiet = self._quiet + 1 if pcm16 == self._silence else 0
        if self._quiet == FLUSH_AFTER_FRAMES:
            self._stream.flush()

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        await self._stream.aclose()

    def replies(self) -> int:
        return self.finals


async def _stt_window(
    fake: tuple[str, str], pattern: list[bytes], count: int, measure: float, send_ms: int
) -> Window:
    from voicehub.voice.providers.deepgram import DeepgramEndpoint, DeepgramLink, DeepgramSTT
    from voicehub_dev.bench.voice_latency import SILENCE

    endpoint = DeepgramEndpoint(api_key=fake[1], base_url=fake[0])
    options: dict[str, Any] = {"link": DeepgramLink(send_ms=send_ms)} if send_ms != 100 else {}
    calls = [
        SttCall(DeepgramSTT(endpoint=endpoint, sample_rate=16000, **options), SILENCE)
        for _ in range(count)
    ]
    try:
        await asyncio.gather(*(call.start() for call in calls))
        window = await pace(calls, pattern, 1.0, measure, seed=count)
    finally:
        await asyncio.gather(*(call.aclose() for call in calls))
    whole_turn = 1.0 + measure >= len(pattern) * 0.02 + 1.0  # every call had one in the run
    if whole_turn and not all(call.finals for call in calls):
        raise RuntimeError("deepgram_providers: a listen stream heard no final transcript")
    return window


async def _tts_round(
    fake: tuple[str, str], text: str, count: int, replies: int, rate: int, encoding: str
) -> float:
    """CPU (us) per 20 ms frame of agent audio, `count` streams of `replies` replies each."""
    from voicehub.voice.providers.deepgram import DeepgramEndpoint, DeepgramTTS

    endpoint = DeepgramEndpoint(api_key=fake[1], base_url=fake[0])
    plugins = [
        DeepgramTTS(endpoint=endpoint, sample_rate=rate, encoding=encoding)  # type: ignore[arg-type]
        for _ in range(count)
    ]

    async def speak(plugin: Any) -> float:
        seconds = 0.0
        for _ in range(replies):
            stream = plugin.stream()
            stream.push_text(text)
            stream.end_input()
            async for audio in stream:
                seconds += audio.frame.duration
        return seconds

    await asyncio.gather(*(speak(plugin) for plugin in plugins[:1]))  # warm: first socket
    started = time.process_time()
    seconds = sum(await asyncio.gather(*(speak(plugin) for plugin in plugins)))
    cpu = time.process_time() - started
    await asyncio.gather(*(plugin.aclose() for plugin in plugins))
    return cpu / max(seconds / 0.02, 1) * 1e6


async def measure(
    fake: tuple[str, str],
    pattern: list[bytes],
    reply: str,
    *,
    count: int,
    seconds: float,
    rounds: int,
) -> dict[str, Any]:
    """The providers' figures (see the module docstring); medians over `rounds`, the runs
    alternated so the machine's drift spreads over all."""
    stt: dict[int, list[float]] = {100: [], 20: []}
    tts: dict[str, list[float]] = {"linear16_16k": [], "mulaw_8k": []}
    harness: list[float] = []
    for _ in range(rounds):
        harness.append(
            (
                await pace([HarnessCall() for _ in range(count)], pattern, 1.0, seconds, 0)
            ).us_per_frame
        )
        for send_ms in stt:
            window = await _stt_window(fake, pattern, count, seconds, send_ms)
            stt[send_ms].append(window.us_per_frame)
        tts["linear16_16k"].append(await _tts_round(fake, reply, count, 3, 16000, "linear16"))
        tts["mulaw_8k"].append(await _tts_round(fake, reply, count, 3, 8000, "mulaw"))
    base = statistics.median(harness)
    net = {ms: round(statistics.median(v) - base, 1) for ms, v in stt.items()}
    return {
        "stt_us_per_frame": net[100],
        "stt_us_per_frame_by_send_ms": {str(ms): us for ms, us in sorted(net.items())},
        "tts_us_per_frame": round(statistics.median(tts["linear16_16k"]), 1),
        "tts_us_per_frame_mulaw_8k": round(statistics.median(tts["mulaw_8k"]), 1),
        "harness_us_per_frame": round(base, 1),
        "providers_setup": {"streams": count, "seconds_measured": seconds, "rounds": rounds},
    }
