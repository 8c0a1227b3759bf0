"""Silero VAD cost per 20 ms frame per call, and where it goes.

`count` calls each hear the same caller pattern: a Piper utterance, then 1.5 s of silence
(the voice bench's caller), twice, after a different lead of silence; all audio is pushed
at once. The figure is process CPU time (all threads: the model runs on the batcher's) over
the frames pushed. Variants, run interleaved (each round runs them all, in turn):

- `per_call`: `SileroVAD`, one model run per window per call, events read by `async for`;
- `batched_iterator`: `BatchedSileroVAD`, read by `async for` (any livekit consumer);
- `batched_engine`: `BatchedSileroVAD` delivering to a callback (`deliver_to`, speech
  boundaries only: no INFERENCE_DONE built): what voicehub's engine runs;
- `batched_engine_ungated`: the same with the silence gate off: the cost on a line whose
  silence is never plainly silent (noise above -70 dBFS);
- `webrtc_engine`: `WebRtcVAD` delivering to a callback.

`model_us_per_frame` is the model's own CPU (onnxruntime, measured around each run on the
thread that ran it) over the same frames: the rest is Python. Pin the process to one CPU
(`taskset -c 0 voicehub bench --only vad`) for per-core figures; `cpus` says what it had.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import time
from typing import Any

import numpy as np

from voicehub.voice.providers.offline import load_vad, synthesize
from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroVAD
from voicehub.voice.providers.offline.silero_model import SileroModel, SileroOptions
from voicehub.voice.providers.offline.vad import vad_for_call
from voicehub_dev.fakes.voice_providers import CALLER_TEXT

RATE = 16000
FRAME_BYTES = RATE // 50 * 2
PAUSE_S = 1.5
VARIANTS = ("per_call", "batched_iterator", "batched_engine", "batched_engine_ungated", "webrtc")


class _TimedModel(SileroModel):
    """A `SileroModel` that counts the CPU time of its runs (on whichever thread)."""

    def __init__(self, sample_rate: int = RATE) -> None:
        self.model_cpu = 0.0
        super().__init__(sample_rate)

    def infer(self, inputs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """As `SileroModel.infer`, timed."""
        started = time.thread_time()
        try:
            return super().infer(inputs, state)
        finally:
            self.model_cpu += time.thread_time() - started


def caller_frames(speech: bytes, count: int) -> list[list[Any]]:
    """Each call's 20 ms frames: a lead of 0 to 240 ms of silence, then twice (utterance,
    1.5 s of silence). Built once, before the timing: the frames are the transport's."""
    from livekit import rtc

    pcm = (speech + bytes(int(PAUSE_S * RATE) * 2)) * 2
    body = [
        rtc.AudioFrame(pcm[start : start + FRAME_BYTES], RATE, 1, FRAME_BYTES // 2)
        for start in range(0, len(pcm) - FRAME_BYTES + 1, FRAME_BYTES)
    ]
    silence = rtc.AudioFrame(bytes(FRAME_BYTES), RATE, 1, FRAME_BYTES // 2)
    return [[silence] * (i % 13) + body for i in range(count)]


async def _run(vads: list[Any], audio: list[list[Any]], direct: bool) -> tuple[float, float]:
    """CPU seconds to push every stream's frames, then to decide the rest."""
    streams = [vad.stream() for vad in vads]
    if direct:
        for stream in streams:
            stream.deliver_to(_ignore, inferences="none")
    started = time.process_time()
    for stream, call in zip(streams, audio, strict=True):
        for frame in call:
            stream.push_frame(frame)
        stream.end_input()
    pushed = time.process_time()

    async def drain(stream: Any) -> None:
        async for _ in stream:  # with a sink: no events, only the end
            pass

    await asyncio.gather(*(drain(stream) for stream in streams))
    ended = time.process_time()
    await asyncio.gather(*(stream.aclose() for stream in streams))
    return pushed - started, ended - pushed


def _ignore(_event: Any) -> None:
    pass


def _variant(name: str, model: _TimedModel, webrtc: Any) -> tuple[Any, bool]:
    """The shared VAD of variant `name`, and whether its events go to a callback."""
    options = SileroOptions(min_speech_duration=0.06, min_silence_duration=0.35)
    if name == "batched_engine_ungated":
        options.silent_peak_dbfs = None  # every window through the model
    if name == "per_call":
        return SileroVAD(model, options), False
    if name == "webrtc":
        return webrtc, True
    return BatchedSileroVAD(SileroVAD(model, options)), name != "batched_iterator"


async def vad_cost(count: int = 200, rounds: int = 3) -> dict[str, Any]:
    """Each variant's CPU us per 20 ms frame over `count` concurrent calls (medians of
    `rounds`, the variants interleaved): in all (`us_per_frame`), pushing frames (cutting
    windows), in the model, and the rest (batches, decisions, events: Python); and the
    share of windows the silence gate decided without the model."""
    # all audio is pushed at once: "slower than realtime" warnings are expected
    logging.getLogger("voicehub.voice").setLevel(logging.ERROR)
    speech = await asyncio.to_thread(synthesize, CALLER_TEXT, "piper", RATE)
    audio = caller_frames(speech, count)
    frames = sum(map(len, audio))
    model = await asyncio.to_thread(_TimedModel)
    webrtc = load_vad("webrtc")
    parts: dict[str, dict[str, list[float]]] = {name: {} for name in VARIANTS}
    skipped: dict[str, float] = {}
    batches: dict[str, float] = {}
    for _ in range(rounds):
        for name in VARIANTS:
            shared, direct = _variant(name, model, webrtc)
            model.model_cpu = 0.0
            push, rest = await _run([vad_for_call(shared) for _ in range(count)], audio, direct)
            figures = {
                "us_per_frame": push + rest,
                "push_us": push,
                "model_us": model.model_cpu,
                "rest_us": rest - model.model_cpu,
            }
            for key, seconds in figures.items():
                parts[name].setdefault(key, []).append(seconds / frames * 1e6)
            if isinstance(shared, BatchedSileroVAD):
                batcher = shared.batcher
                skipped[name] = round(batcher.skipped / (batcher.windows + batcher.skipped), 3)
                batches[name] = round(batcher.windows / max(batcher.batches, 1), 1)
    speech_s = len(speech) / 2 / RATE
    return {
        "vad_cost": {
            name: {key: round(statistics.median(values), 1) for key, values in figures.items()}
            for name, figures in parts.items()
        },
        "vad_windows_skipped": skipped,
        "vad_cost_setup": {
            "calls": count,
            "rounds_interleaved": rounds,
            "mean_batch": batches,
            "caller": f"twice ({speech_s:.2f} s of speech, {PAUSE_S} s of digital silence)",
            "cpus": len(os.sched_getaffinity(0)),
            "tick_s": 0.02,
        },
    }


async def run(store: str, quick: bool) -> dict[str, Any]:
    """The `vad` section of `voicehub bench`."""
    del store  # no store involved
    return {"vad": await vad_cost(64 if quick else 200, 1 if quick else 3)}
