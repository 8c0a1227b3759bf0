"""Cloud pipeline figures: voicehub's pipeline session with Deepgram STT (Nova, streaming)
and Deepgram TTS (Aura, streaming) against the fake Deepgram on loopback
(`voicehub_dev.fakes.deepgram`), side by side with the offline stack in the same run.

- ``us_per_frame``: process CPU per 20 ms caller frame per call, paced calls on one event
  loop (`voice_load.pace`), each call a pipeline session (`voice.engine`) with its own `DeepgramSTT`
  (listen socket), `DeepgramTTS` (speak socket), WebRTC's VAD and a scripted agent. The fake
  Deepgram runs in a child process, so its work (energy segmentation, Piper rendering the
  replies, its sockets) is not counted: what is timed is voicehub, livekit-agents, the
  Deepgram SDK and the client side of the sockets. ``offline_us_per_frame``: the same calls
  with PocketSphinx and Piper in process instead (same VAD, agent and caller pattern).
  ``harness_us_per_frame``: the same pacing with no session (`voice_load.HarnessCall`): what
  the bench's own feeding costs, in the figures above; ``net_us_per_frame`` is the Deepgram
  figure less it.
- ``calls_per_core``: the Deepgram calls one CPU carries (the bench pinned to CPU 0, the
  fake Deepgram to CPU 1), ramped until the loop's lag p99 reaches 20 ms or a call that had
  a whole turn never answered (`calls_ramp_detail` has every step).
- ``providers``: the Deepgram STT and TTS on their own, no session around them
  (`deepgram_providers`): what the providers cost whichever engine drives them.
- ``v2v_latency_ms``: end of the caller's speech (last voiced frame pushed) to the first
  agent audio at the transport, turn by turn as in the `voice` section (`voice_latency`,
  Silero VAD with the tuned turn-taking), on the Deepgram session; the fake runs in process
  here (its replies are rendered before the turns, so Piper's time is not in the figure).

The LLM is voicehub's scripted agent, not the OpenAI chat fake: the figures isolate the
STT/TTS cost and delay, and a model's own latency would come on top.

The fake's delays are set to provider figures:

- STT: every listen message (interim, final, UtteranceEnd) is held back 300 ms, on top of the
  fake's endpointing (300 ms of silence, the research-cloud desk's `endpointing`). The
  300 ms is an ASSUMPTION: Deepgram markets its streaming recognition as "under 300 ms",
  which could not be checked against a measured, published figure from here.
- TTS: 200 ms to the first audio of each flush or REST request: Deepgram's engineering blog
  on Aura-2 ("Engineering real-time, low-latency voice AI at scale", deepgram.com/learn)
  states stable sub-200 ms time to first byte at scale (about 90 ms in steady state); the
  upper bound is used. Network distance to Deepgram is not added (loopback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import statistics
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

from voicehub_dev.fakes.child_process import ChildFake, serving_until_told

STT_DELAY_S = 0.3  # assumption: "under 300 ms" streaming STT (see the docstring)
TTS_FIRST_BYTE_S = 0.2  # Aura-2 sub-200 ms time to first byte (Deepgram's blog)
RATE = 16000

Stack = Literal["deepgram", "offline", "harness"]


def _serve_fake(conn: Connection, transcript: str, replies: list[str]) -> None:
    """Child process: the fake Deepgram, every utterance heard as `transcript`, until told."""

    async def serve() -> None:
        from voicehub_dev.fakes.deepgram import FakeDeepgram, piper_speech

        for reply in replies:  # rendered once, before the calls
            piper_speech(reply, RATE)
        async with FakeDeepgram() as fake:
            fake.listen_delay, fake.speak_delay = STT_DELAY_S, TTS_FIRST_BYTE_S
            fake.transcripts.extend([transcript] * 100_000)
            conn.send((fake.url, fake.api_key))
            await serving_until_told(conn)

    asyncio.run(serve())


def _deepgram_providers(url: str, key: str, keyterms: tuple[str, ...]) -> tuple[Any, Any]:
    from voicehub.voice.providers.deepgram import DeepgramSTT, DeepgramTTS
    from voicehub.voice.providers.deepgram.connection import DeepgramEndpoint

    endpoint = DeepgramEndpoint(api_key=key, base_url=url)
    stt = DeepgramSTT(endpoint=endpoint, sample_rate=RATE, keyterms=keyterms)
    tts = DeepgramTTS(endpoint=endpoint, model="aura-2-thalia-en", sample_rate=RATE)
    tts.prewarm()  # as a desk's call does (`voice_stack`)
    return stt, tts


async def _paced_run(
    stack: Stack, fake: tuple[str, str] | None, pattern: list[bytes], count: int, measure: float
) -> tuple[float, float, int]:
    """CPU per frame per call (us) of `count` paced calls on `stack`, the frames delivered
    against the clock (%), and the calls that never replied."""
    window, silent = await _paced_window(stack, fake, pattern, count, measure)
    return window.us_per_frame, window.delivered_pct, silent


async def _paced_window(
    stack: Stack, fake: tuple[str, str] | None, pattern: list[bytes], count: int, measure: float
) -> tuple[Any, int]:
    """The paced window of `count` calls on `stack`, and the calls that never replied."""
    from voicehub.agents.agent import Agent
    from voicehub.agents.scripted import ScriptedLLM
    from voicehub.hub import Hub
    from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad
    from voicehub_dev.bench.voice_load import STAGGER, HarnessCall, pace
    from voicehub_dev.fakes.voice_providers import CALLER_TEXT, REPLY_TEXT, VoicehubCall

    agent = Agent(id="desk", llm=ScriptedLLM([], fallback=REPLY_TEXT))
    calls: list[VoicehubCall | HarnessCall] = []
    closers: list[Any] = []
    async with Hub() as hub:
        for i in range(count):
            if stack == "harness":
                calls.append(HarnessCall())
                continue
            if stack == "deepgram":
                assert fake is not None
                stt, tts = _deepgram_providers(*fake, tuple(CALLER_TEXT.split()))
                closers.append(tts)
            else:
                stt, tts = PocketSphinxSTT(), PiperTTS()
            call = VoicehubCall(
                hub, f"{stack}-{i}", agent, stt=stt, tts=tts, vad=load_vad("webrtc")
            )
            calls.append(call)
        try:
            await asyncio.gather(*(call.start() for call in calls))
            window = await pace(calls, pattern, STAGGER, measure, seed=0)
        finally:
            await asyncio.gather(*(call.aclose() for call in calls))
            await asyncio.gather(*(tts.aclose() for tts in closers))
    silent = sum(1 for call in calls if call.replies() == 0) if stack != "harness" else 0
    return window, silent


@contextlib.contextmanager
def _pinned(cpu: int, child: int | None) -> Any:
    """This process on `cpu` alone (and `child` on another CPU) for the block."""
    before = os.sched_getaffinity(0)
    others = sorted(before - {cpu})
    if child is not None and others:
        os.sched_setaffinity(child, {others[0]})
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


async def calls_per_core(
    fake: tuple[str, str], pattern: list[bytes], steps: list[int], measure: float, child: int
) -> dict[str, Any]:
    """Ramp Deepgram calls on one CPU until the lag p99 reaches 20 ms or a call is silent."""
    from voicehub_dev.bench.voice_load import LAG_LIMIT_MS

    detail: dict[str, dict[str, Any]] = {}
    carried = 0
    with _pinned(0, child):
        for count in steps:
            window, silent = await _paced_window("deepgram", fake, pattern, count, measure)
            detail[str(count)] = {
                "lag_p99_ms": round(window.lag_p99_ms, 2),
                "us_per_frame": round(window.us_per_frame, 1),
                "frames_delivered_pct": round(window.delivered_pct, 1),
                "calls_without_reply": silent,
            }
            if window.lag_p99_ms >= LAG_LIMIT_MS or silent or window.delivered_pct < 99.0:
                break
            carried = count
    return {
        "calls_per_core": carried,
        "calls_ramp_detail": detail,
        "calls_setup": {"pinned": "bench on CPU 0, fake Deepgram on CPU 1", "measure": measure},
    }


async def cpu_per_frame(
    count: int,
    measure: float,
    rounds: int,
    steps: list[int] | None = None,
    provider_seconds: float = 6.0,
) -> dict[str, Any]:
    """Both stacks, alternated `rounds` times (the machine may be shared); medians. Then the
    providers alone, and the pinned ramp over `steps` calls (none: skipped)."""
    from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, synthesize
    from voicehub_dev.bench.voice_latency import SILENCE, frames_of
    from voicehub_dev.fakes.voice_providers import CALLER_TEXT, REPLY_TEXT

    utterance = frames_of(await asyncio.to_thread(synthesize, CALLER_TEXT, "piper", RATE))
    pattern = utterance + [SILENCE] * 75  # 1.5 s of silence: a turn, then the reply
    stt, tts = PocketSphinxSTT(), PiperTTS()  # the offline models, loaded before timing
    await asyncio.to_thread(stt.prewarm)
    await asyncio.to_thread(tts.prewarm)
    server = ChildFake(_serve_fake, CALLER_TEXT, [REPLY_TEXT])
    try:
        fake: tuple[str, str] = await server.start()
        samples: dict[Stack, list[float]] = {"deepgram": [], "offline": [], "harness": []}
        silent: dict[Stack, int] = {"deepgram": 0, "offline": 0, "harness": 0}
        delivered: dict[Stack, list[float]] = {"deepgram": [], "offline": [], "harness": []}
        await _paced_run("deepgram", fake, pattern, 2, 2.0)  # warm-up: imports, first turns
        await _paced_run("offline", None, pattern, 2, 2.0)
        order: list[Stack] = ["deepgram", "offline", "harness"]
        for round_ in range(rounds):
            for stack in order[round_ % 3 :] + order[: round_ % 3]:
                us, pct, quiet = await _paced_run(stack, fake, pattern, count, measure)
                samples[stack].append(us)
                delivered[stack].append(pct)
                silent[stack] += quiet
        from voicehub_dev.bench.deepgram_providers import measure as providers

        alone = await providers(
            fake, pattern, REPLY_TEXT, count=count * 2, seconds=provider_seconds, rounds=rounds
        )
        ramp = await calls_per_core(fake, pattern, steps, measure, server.pid or 0) if steps else {}
    finally:
        await server.stop()
    return {
        **ramp,
        "providers": alone,
        "us_per_frame": round(statistics.median(samples["deepgram"]), 1),
        "offline_us_per_frame": round(statistics.median(samples["offline"]), 1),
        "harness_us_per_frame": round(statistics.median(samples["harness"]), 1),
        "net_us_per_frame": round(  # each round's own difference: drift cancels out
            statistics.median(
                [d - h for d, h in zip(samples["deepgram"], samples["harness"], strict=True)]
            ),
            1,
        ),
        "runs_us_per_frame": {k: [round(v, 1) for v in vs] for k, vs in samples.items()},
        # calls that never answered in the window (an overloaded loop starves turns), and
        # the caller frames pushed against what the clock asked for (below 100: behind)
        "silent_calls": {k: v for k, v in silent.items() if k != "harness"},
        "delivered_pct_min": {k: round(min(vs), 1) for k, vs in delivered.items()},
        "cpu_setup": {
            "calls": count,
            "rounds": rounds,
            "seconds_measured": measure,
            "vad": "webrtc",
            "caller_pattern": f"{len(utterance) * 0.02:.2f} s of speech, 1.5 s silence",
            "offline_stack": "pocketsphinx, piper (in process)",
            "fake": "child process (its CPU is not counted)",
        },
    }


async def v2v(turns: int) -> dict[str, Any]:
    """Voice-to-voice latency on the Deepgram session, the fake's delays set (docstring)."""
    from voicehub_dev.bench.voice_latency import TUNED, TURNS, WARMUP_TURN, v2v_latency
    from voicehub_dev.fakes.deepgram import FakeDeepgram, piper_speech

    script = [WARMUP_TURN, *TURNS[:turns]]
    for _, _, reply in script:
        await asyncio.to_thread(piper_speech, reply, RATE)
    async with FakeDeepgram() as fake:
        fake.listen_delay, fake.speak_delay = STT_DELAY_S, TTS_FIRST_BYTE_S
        keyterms = tuple(keyword for _, keyword, _ in script)
        stt, tts = _deepgram_providers(fake.url, fake.api_key, keyterms)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                return await v2v_latency(
                    "memory",
                    Path(tmp),
                    turns,
                    "silero",
                    TUNED,
                    providers=(stt, tts),
                    before_turn=fake.transcripts.append,
                )
        finally:
            await tts.aclose()


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `cloud_pipeline` section: about 40 s with `quick`, a few minutes without."""
    del store  # the calls' rooms are in memory: the store is not what is measured
    from voicehub_dev.bench.voice import _HangupNoise

    started = time.perf_counter()
    hangup_noise = _HangupNoise()
    logging.getLogger("livekit.agents").addFilter(hangup_noise)
    try:
        latency = await v2v(2 if quick else 8)
        if quick:
            cpu = await cpu_per_frame(
                count=4, measure=4.0, rounds=1, steps=[4], provider_seconds=2.0
            )
        else:
            steps = [25, 50, 75, 100, 125, 150, 200, 250, 300]
            cpu = await cpu_per_frame(count=6, measure=6.0, rounds=3, steps=steps)
    finally:
        logging.getLogger("livekit.agents").removeFilter(hangup_noise)
    return {
        "cloud_pipeline": {
            "us_per_frame": cpu.pop("us_per_frame"),
            "offline_us_per_frame": cpu.pop("offline_us_per_frame"),
            "harness_us_per_frame": cpu.pop("harness_us_per_frame"),
            "net_us_per_frame": cpu.pop("net_us_per_frame"),
            "load_average_1m": round(os.getloadavg()[0], 2),
            **cpu,
            "v2v_latency_ms": {key: latency[key] for key in ("median", "p95", "max")},
            "v2v_detail": {
                key: value for key, value in latency.items() if key not in ("median", "p95", "max")
            },
            "provider_delays_ms": {
                "stt_results": STT_DELAY_S * 1000,
                "stt_results_source": "assumption (Deepgram's 'under 300 ms' claim)",
                "tts_first_byte": TTS_FIRST_BYTE_S * 1000,
                "tts_first_byte_source": "Deepgram blog: Aura-2 sub-200 ms TTFB",
            },
            "llm": "scripted (no model latency)",
            "quick": quick,
            "section_seconds": round(time.perf_counter() - started, 1),
        }
    }
