"""Voice figures: voice-to-voice latency on the embedded stack, voicehub's engine's CPU per
frame against a bare livekit `AgentSession`, and how many calls one core carries.

Caller audio is paced on the real clock, one 20 ms frame of 16 kHz PCM16 every 20 ms, as a
socket delivers it. Calls run in-process: voicehub's `PipelineVoiceSession` over an in-memory
`CallTransport` that confirms playout as soon as a mark arrives (`voice_fakes`). The load
figures (`voice_load`) use fast fake STT, LLM and TTS with WebRTC's VAD; after a warm-up the
heap is frozen (`gc.freeze`), as a server does once started. One process is one core of
Python (the GIL); the rest of the machine is left to the OS and other processes. Each figure
comes with the settings it was measured under, and the load average, since the machine may
be shared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any


class _HangupNoise(logging.Filter):
    """Drops livekit's warning for a turn cut by the hang-up: the paced runs end calls
    mid-utterance by design, hundreds at a time."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "speech scheduling is paused" not in record.getMessage()


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `voice` section: about 35 s with `quick`, about 4 minutes without."""
    hangup_noise = _HangupNoise()
    logging.getLogger("livekit.agents").addFilter(hangup_noise)
    try:
        return await _run(store, quick)
    finally:
        logging.getLogger("livekit.agents").removeFilter(hangup_noise)


async def _run(store: str, quick: bool) -> dict[str, Any]:
    # imported here: livekit and the models load only when this section runs
    from voicehub.voice.providers.offline import synthesize
    from voicehub_dev.bench.cpu_pinning import pinned_to_one_cpu
    from voicehub_dev.bench.vad_batch import vad_cost
    from voicehub_dev.bench.voice_latency import (
        DEFAULTS,
        RATE,
        SILENCE,
        TICK,
        TUNED,
        TURNS,
        frames_of,
        v2v_latency,
        v2v_shipped,
    )
    from voicehub_dev.bench.voice_load import (
        Load,
        calls_per_core,
        cpu_steal_ticks,
        overhead,
        sqlite_or_memory,
        steal_pct_between,
        wakeups_per_frame,
    )
    from voicehub_dev.fakes.voice_providers import CALLER_TEXT

    started = time.perf_counter()
    load_before, steal_before = os.getloadavg()[0], cpu_steal_ticks()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        turns = 2 if quick else len(TURNS)
        latency = {"silero": await v2v_latency(store, folder, turns, "silero", TUNED)}
        latency["shipped"] = await v2v_shipped(store, folder, turns)
        if not quick:
            latency["webrtc"] = await v2v_latency(store, folder, turns, "webrtc", TUNED)
            latency["silero_defaults"] = await v2v_latency(store, folder, turns, "silero", DEFAULTS)
        utterance = frames_of(await asyncio.to_thread(synthesize, CALLER_TEXT, "piper", RATE))
        pause = 75  # 1.5 s of silence after each utterance: a turn, then the reply
        load = Load(sqlite_or_memory(store, folder), utterance + [SILENCE] * pause)
        for variant in ("harness", "bare", "framework"):  # lazy imports and first turns
            await load.run(variant, 4, 1.0, 1.0 if quick else load.cycle + 1.0, "per-call")
        gc.collect()
        gc.freeze()  # what survived the warm-up (modules, models) is no longer scanned
        try:
            # The headline ramp is the server's setup: provider objects per call on shared
            # models. The shared-objects ramp is kept to show why (metrics fan-out).
            if quick:
                cost = await overhead(load, 25, 1, 1.0, 2.0, "per-call")
                ramp = await calls_per_core(
                    load, [25, 50], 1.0, 2.0, "per-call", tries=1, refinements=0
                )
                shared: dict[str, Any] = {}
            else:
                cost = await overhead(load, 40, 6, 1.0, 4.0, "per-call")
                steps = [10, 25, 50, 100, 150, 200, 300]
                ramp = await calls_per_core(load, steps, 1.0, 4.0, "per-call")
                shared = await calls_per_core(load, steps, 1.0, 4.0, "shared")
            # the headline: Silero on every call, batched across calls
            silero_load = dataclasses.replace(load, vad=_batched_silero())
            wakeups = await wakeups_per_frame(
                silero_load, 25 if quick else 40, 1.0, 2.0 if quick else 4.0, "per-call"
            )
            # from low, then refined (`ramp`): the figure on any CPU (an AVX2-only EPYC
            # failed the old first step, 100, and read 0)
            silero_steps = [25, 50] if quick else [10, 25, 50, 100, 150, 200, 300, 400]
            with pinned_to_one_cpu() as cpu:  # "per core": every thread on one CPU
                refine = 1 if quick else 4
                batched = await calls_per_core(
                    silero_load,
                    silero_steps,
                    1.0,
                    2.0 if quick else 4.0,
                    "per-call",
                    tries=1,
                    refinements=refine,
                )
                # the same with the end-of-turn model asked at every pause (`turn = "model"`)
                model_load = dataclasses.replace(silero_load, session_options=_turn_model())
                model_steps = [5, 10] if quick else [5, 10, 25, 50, 75, 100, 150]
                with_model = await calls_per_core(
                    model_load,
                    model_steps,
                    1.0,
                    2.0 if quick else 4.0,
                    "per-call",
                    tries=1,
                    refinements=refine,
                )
            vad_cost_figures = await vad_cost(64 if quick else 200, 1)
        finally:
            gc.unfreeze()
    silero = latency["silero"]
    return {
        "voice": {
            "v2v_latency_ms": {key: silero[key] for key in ("median", "p95", "max")},
            # a desk as shipped: Whisper and the end-of-turn model (`v2v_shipped`)
            "v2v_ms": {key: latency["shipped"][key] for key in ("median", "p95", "max")},
            "v2v_latency_by_config": latency,
            "v2v_setup": {
                **TUNED,
                "stack": "silero VAD, pocketsphinx, scripted LLM, piper (22.05 kHz)",
                "turns_counted": turns,
                "warmup_turns": 1,
                "transport": "in-process, playout confirmed at once",
            },
            **cost,
            "engine_us_per_frame": round(
                cost["framework_us_per_frame"] - cost["harness_us_per_frame"], 1
            ),
            "agentsession_us_per_frame": round(
                cost["bare_agentsession_us_per_frame"] - cost["harness_us_per_frame"], 1
            ),
            "calls_per_core": batched["calls_per_core"],
            "calls_per_core_cpu": cpu,
            "calls_per_core_vad": "silero, batched across calls (one ONNX run per 20 ms tick)",
            "calls_per_core_turn_model": with_model["calls_per_core"],
            "calls_ramp_turn_model": with_model["calls_ramp_detail"],
            "package_lines": package_lines(),
            "calls_ramp_silero_batched": batched["calls_ramp_detail"],
            **vad_cost_figures,
            **wakeups,
            **{f"{key}_webrtc": value for key, value in ramp.items()},
            **{f"{key}_shared_plugins": value for key, value in shared.items()},
            "calls_transport": "in-process (voicehub CallTransport in memory, no socket)",
            "caller_pattern": f"{len(utterance) * TICK:.2f} s of speech, {pause * TICK} s silence",
            "gc": "gc.freeze() after warm-up",
            "quick": quick,  # quick runs are smoke tests: one short round, +-15% noise
            "load_average_1m": {"start": load_before, "end": os.getloadavg()[0]},
            "cpu_steal_pct": steal_pct_between(steal_before, cpu_steal_ticks()),
            "section_seconds": round(time.perf_counter() - started, 1),
        }
    }


def package_lines() -> int:
    """Lines of Python in the `voicehub.voice` package (the engine, its providers, the relay)."""
    import voicehub.voice

    root = Path(voicehub.voice.__file__).resolve().parent
    return sum(len(path.read_text().splitlines()) for path in root.rglob("*.py"))


def _turn_model() -> dict[str, Any]:
    """Session options for turns ended by the end-of-turn model (Smart Turn), as a desk's
    `turn = "model"` sets them."""
    from voicehub.voice.engine.options import EngineOptions
    from voicehub.voice.engine.turn_engine import TurnEngineSettings
    from voicehub.voice.turns.setup import turn_setup

    setup = turn_setup("model", 2.0, owner="the calls-per-core bench")
    if setup.model is None:
        raise RuntimeError("the end-of-turn model did not load: see the warning above")
    return {
        "options": EngineOptions(turn=TurnEngineSettings(policy=setup.settings)),
        "end_of_turn": setup.model,
    }


def _batched_silero() -> Any:
    """A factory of per-call Silero VADs sharing one model and one batcher."""
    from voicehub.voice.providers.offline import load_vad
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroVAD

    shared = load_vad("silero")
    assert isinstance(shared, SileroVAD)
    return BatchedSileroVAD(shared).for_call
