"""Silero VAD cost per 20 ms frame per call: per-call inference against batched inference.

`count` calls each get the same Piper utterance (with a different lead of silence) pushed
at once; the figure is process CPU time (all threads) over the frames pushed. The batched
figure also gives the mean batch size the ticks reached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from voicehub.bench.voice_fakes import CALLER_TEXT
from voicehub.voice.providers.offline import load_vad, synthesize
from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD
from voicehub.voice.providers.offline.vad import vad_for_call

RATE = 16000
FRAME_BYTES = RATE // 50 * 2


async def _run(vads: list[Any], audio: list[bytes]) -> float:
    """CPU microseconds per 20 ms frame to run every stream over its audio."""
    from livekit import rtc

    # all audio is pushed at once: livekit's "slower than realtime" warning is expected
    logging.getLogger("livekit.plugins.silero").setLevel(logging.ERROR)

    streams = [vad.stream() for vad in vads]
    frames = 0
    started = time.process_time()
    for stream, pcm in zip(streams, audio, strict=True):
        for start in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES):
            chunk = pcm[start : start + FRAME_BYTES]
            stream.push_frame(rtc.AudioFrame(chunk, RATE, 1, FRAME_BYTES // 2))
            frames += 1
        stream.end_input()

    async def drain(stream: Any) -> None:
        async for _ in stream:
            pass

    await asyncio.gather(*(drain(stream) for stream in streams))
    cpu = time.process_time() - started
    await asyncio.gather(*(stream.aclose() for stream in streams))
    return cpu / frames * 1e6


async def vad_cost(count: int = 64) -> dict[str, Any]:
    """Per-call and batched Silero on `count` concurrent calls (CPU us per frame)."""
    from livekit.plugins import silero

    shared = load_vad("silero")
    assert isinstance(shared, silero.VAD)
    speech = await asyncio.to_thread(synthesize, CALLER_TEXT, "piper", RATE)
    silence = bytes(FRAME_BYTES * 25)
    audio = [bytes(FRAME_BYTES * (i % 13)) + silence + speech + silence for i in range(count)]
    per_call = await _run([vad_for_call(shared) for _ in range(count)], audio)
    batched_vad = BatchedSileroVAD(shared)
    batched = await _run([batched_vad.for_call() for _ in range(count)], audio)
    batcher = batched_vad.batcher
    return {
        "vad_per_call_us_per_frame": round(per_call, 1),
        "vad_batched_us_per_frame": round(batched, 1),
        "vad_cost_setup": {
            "calls": count,
            "mean_batch": round(batcher.windows / max(batcher.batches, 1), 1),
            "tick_s": batcher.tick,
        },
    }
