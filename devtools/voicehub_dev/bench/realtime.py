"""The `realtime` section: CPU per 20 ms frame per call of the realtime relay
(`RealtimeVoiceSession` through the real `openai` SDK to a loopback model in another
process), side by side with the pipeline session (`voice.engine`) in the same run,
and how many relayed calls one core carries with the loop's lag p99 under 20 ms.

Each frame crosses the relay both ways: caller audio up (its speech evidence, then
batched appends: 16 -> 24 kHz, base64, a WebSocket frame per batch) and model audio down
(parse, base64, 24 -> 16 kHz, the transport, a mark every 200 ms confirmed at once), which
is more than a real call, where the model speaks only part of the time. The API does not
document how much audio a delta holds: the headline runs 20 ms deltas (one event per
frame, the relay's worst case), and `us_per_frame_by_delta_ms` adds 100 ms deltas (what the
test fake streams). The headline transport runs at 16 kHz (the WebSocket transport's rate);
`us_per_frame_by_transport_hz` adds 8 kHz (PCM16, resampled to and from the model's 24 kHz)
and 24 kHz (the model's own rate, a browser's WebSocket call with `?rate=24000`: no
resampling either way). `us_per_frame_net_by_path` sets each kind of call beside the SDK
floor of its own messages: the browser at 16 and 24 kHz, and a phone line relayed as G.711
mu-law end to end (`audio/pcmu` both ways, the model's mu-law handed to the transport as
it came).

Pacing the frames costs by itself what the `harness` run measures (no session: sleep until
the frame is due, hand it over); it is inside every gross figure, so the `_net` figures
take it out of both the relay and the pipeline. The `floor` run moves the same messages over
the same SDK connection with no audio work (`realtime_floor`): what any relay on the SDK
costs at least. Wake-ups (event-loop callbacks) per frame
are counted in separate runs (counting slows every callback).
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from voicehub.hub import Hub
from voicehub.voice.transport import WireAudio
from voicehub_dev.bench.realtime_floor import FloorCall
from voicehub_dev.bench.voice_load import (
    LAG_LIMIT_MS,
    HarnessCall,
    Load,
    Window,
    pace,
    sqlite_or_memory,
)
from voicehub_dev.fakes.openai_realtime import LoopbackRealtimeModel
from voicehub_dev.fakes.voice_providers import LoopbackTransport

ROOM = "bench-realtime"
LONG_DELTA_MS = 100


class MulawLoopbackTransport(LoopbackTransport):
    """A phone line's transport as the relay sees it: 8 kHz, G.711 on its wire, taking
    mu-law as it is (`send_wire_audio`); it counts, like `LoopbackTransport`."""

    def __init__(self) -> None:
        super().__init__(8000)

    @property
    def wire_audio(self) -> WireAudio:
        return WireAudio("mulaw", 8000)

    async def send_wire_audio(self, data: bytes) -> None:
        await self.send_audio(data)


class RealtimeCall:
    """One relayed call (the paced loop's `Call`); `mulaw`: on a phone line."""

    def __init__(
        self, hub: Hub, index: int, client: Any, sample_rate: int = 16000, mulaw: bool = False
    ) -> None:
        from voicehub.agents.agent import Agent
        from voicehub.voice.realtime_session import RealtimeVoiceSession

        self.transport = MulawLoopbackTransport() if mulaw else LoopbackTransport(sample_rate)
        self.session = RealtimeVoiceSession(
            hub,
            f"{ROOM}-{index}",
            Agent(id="desk", instructions="You are a bench."),
            self.transport,
            client=client,
            attach_delivery=False,
        )
        self.transport.session = self.session

    async def start(self) -> None:
        await self.session.start()

    async def push(self, pcm16: bytes) -> None:
        await self.session.push_audio(pcm16)

    async def aclose(self) -> None:
        await self.session.aclose()

    def replies(self) -> int:
        return 1 if self.transport.audio_bytes else 0


async def _relay(
    base_url: str,
    count: int,
    pattern: list[bytes],
    measure: float,
    *,
    count_wakeups: bool = False,
    sample_rate: int = 16000,
    mulaw: bool = False,
) -> Window:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)
    async with Hub() as hub:
        calls = [RealtimeCall(hub, i, client, sample_rate, mulaw) for i in range(count)]
        try:
            await asyncio.gather(*(call.start() for call in calls))
            window = await pace(
                calls, pattern, 1.0, measure, seed=count, count_wakeups=count_wakeups
            )
        finally:
            await asyncio.gather(*(call.aclose() for call in calls))
    if not all(call.replies() for call in calls):
        raise RuntimeError("realtime: a relayed call got no model audio back")
    return window


async def _floor(
    base_url: str, count: int, pattern: list[bytes], measure: float, *, mulaw: bool = False
) -> Window:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)
    calls = [FloorCall(client, mulaw=mulaw) for _ in range(count)]
    try:
        await asyncio.gather(*(call.start() for call in calls))
        window = await pace(calls, pattern, 1.0, measure, seed=count)
    finally:
        await asyncio.gather(*(call.aclose() for call in calls))
    if not all(call.replies() for call in calls):
        raise RuntimeError("realtime: a floor call got no model audio back")
    return window


async def _harness(
    count: int, pattern: list[bytes], measure: float, *, count_wakeups: bool = False
) -> Window:
    calls = [HarnessCall() for _ in range(count)]
    return await pace(calls, pattern, 1.0, measure, seed=count, count_wakeups=count_wakeups)


async def _caller(sample_rate: int) -> list[bytes]:
    """The caller's pattern at `sample_rate`: the utterance, then 1.5 s of silence."""
    from voicehub.voice.providers.offline import synthesize
    from voicehub_dev.fakes.voice_providers import CALLER_TEXT

    pcm = await asyncio.to_thread(synthesize, CALLER_TEXT, "piper", sample_rate)
    frame = sample_rate // 50 * 2
    pcm += bytes(-len(pcm) % frame)
    return [pcm[i : i + frame] for i in range(0, len(pcm), frame)] + [bytes(frame)] * 75


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """About 40 s with `quick`, about 2 minutes without."""
    started = time.perf_counter()
    patterns = {rate: await _caller(rate) for rate in (8000, 16000, 24000)}
    pattern = patterns[16000]
    model = LoopbackRealtimeModel(delta_ms=20)
    long_deltas = LoopbackRealtimeModel(delta_ms=LONG_DELTA_MS)
    await asyncio.gather(model.start(), long_deltas.start())
    measure = 2.0 if quick else 4.0
    count = 25 if quick else 40
    try:
        await _relay(model.base_url, 4, pattern, 1.0)  # warm-up: imports, first connections
        with tempfile.TemporaryDirectory() as tmp:
            load = Load(sqlite_or_memory(store, Path(tmp)), pattern)
            await load.run("framework", 4, 1.0, 1.0, "per-call")  # warm-up
            gc.collect()
            relay = await _relay(model.base_url, count, pattern, measure)
            # a loaded machine may starve a pipeline call of its reply: counted, not fatal
            pipeline = await load.run("framework", count, 1.0, measure, "per-call", all_reply=False)
            harness = await _harness(count, pattern, measure)
            relay_long = await _relay(long_deltas.base_url, count, pattern, measure)
            by_rate = {
                rate: await _relay(model.base_url, count, patterns[rate], measure, sample_rate=rate)
                for rate in (8000, 24000)
            }
            by_rate[16000] = relay
            phone = await _relay(model.base_url, count, patterns[8000], measure, mulaw=True)
            # after the relay's runs, so theirs are taken as before it was added
            floor = await _floor(model.base_url, count, pattern, measure)
            phone_floor = await _floor(model.base_url, count, patterns[8000], measure, mulaw=True)
            wakeups = {
                "relay": await _relay(model.base_url, count, pattern, 2.0, count_wakeups=True),
                "harness": await _harness(count, pattern, 2.0, count_wakeups=True),
            }
        ramp: dict[int, float] = {}
        carried = 0
        for step in [100, 200, 400] if quick else [100, 200, 300, 400, 600, 800]:
            window = await _relay(model.base_url, step, pattern, measure)
            ramp[step] = round(window.lag_p99_ms, 2)
            if window.lag_p99_ms > LAG_LIMIT_MS or window.delivered_pct < 99.0:
                break
            carried = step
    finally:
        await asyncio.gather(model.stop(), long_deltas.stop())
    relay_net = relay.us_per_frame - harness.us_per_frame
    pipeline_net = pipeline.us_per_frame - harness.us_per_frame
    floor_net = floor.us_per_frame - harness.us_per_frame
    paths = {  # (relay, floor) net of the harness, per kind of call
        "browser_16k": (relay_net, floor_net),
        "browser_24k": (by_rate[24000].us_per_frame - harness.us_per_frame, floor_net),
        "phone_mulaw": (
            phone.us_per_frame - harness.us_per_frame,
            phone_floor.us_per_frame - harness.us_per_frame,
        ),
    }
    wakeups_per_frame = {
        name: (window.wakeups or 0) / max(window.frames, 1) for name, window in wakeups.items()
    }
    return {
        "realtime": {
            "us_per_frame": round(relay.us_per_frame, 1),
            "pipeline_us_per_frame": round(pipeline.us_per_frame, 1),
            "ratio_to_pipeline": round(relay.us_per_frame / pipeline.us_per_frame, 3),
            # pacing the frames costs this by itself, in both figures above
            "harness_us_per_frame": round(harness.us_per_frame, 1),
            "pipeline_calls_without_reply": pipeline.silent_calls,
            # under 99: the loop fell behind the clock, and the per-frame figures with it
            "frames_delivered_pct": {
                "relay": round(relay.delivered_pct, 1),
                "pipeline": round(pipeline.delivered_pct, 1),
                "harness": round(harness.delivered_pct, 1),
            },
            "us_per_frame_net": round(relay_net, 1),
            "pipeline_us_per_frame_net": round(pipeline_net, 1),
            "ratio_to_pipeline_net": round(relay_net / pipeline_net, 3),
            # the SDK's messages alone, no audio work: no relay on the SDK goes under it
            "floor_us_per_frame": round(floor.us_per_frame, 1),
            "floor_us_per_frame_net": round(floor_net, 1),
            "floor_ratio_to_pipeline_net": round(floor_net / pipeline_net, 3),
            # each kind of call against the SDK floor of its own messages: a browser at
            # 16 kHz (resampled both ways), at 24 kHz (the model's rate), a phone line
            # relayed as G.711 mu-law both ways
            "us_per_frame_net_by_path": {k: round(v[0], 1) for k, v in paths.items()},
            "floor_us_per_frame_net_by_path": {k: round(v[1], 1) for k, v in paths.items()},
            "ratio_to_floor_by_path": {
                k: round(v[0] / v[1], 2) if v[1] > 0 else None for k, v in paths.items()
            },
            "ratio_to_floor_net": round(relay_net / floor_net, 2) if floor_net > 0 else None,
            "us_per_frame_by_delta_ms": {
                "20": round(relay.us_per_frame, 1),
                str(LONG_DELTA_MS): round(relay_long.us_per_frame, 1),
            },
            "us_per_frame_net_by_delta_ms": {
                "20": round(relay_net, 1),
                str(LONG_DELTA_MS): round(relay_long.us_per_frame - harness.us_per_frame, 1),
            },
            "us_per_frame_by_transport_hz": {
                str(rate): round(by_rate[rate].us_per_frame, 1) for rate in sorted(by_rate)
            },
            "us_per_frame_net_by_transport_hz": {
                str(rate): round(by_rate[rate].us_per_frame - harness.us_per_frame, 1)
                for rate in sorted(by_rate)
            },
            "wakeups_per_frame": {
                "relay": round(wakeups_per_frame["relay"], 2),
                "harness": round(wakeups_per_frame["harness"], 2),
                "relay_path": round(wakeups_per_frame["relay"] - wakeups_per_frame["harness"], 2),
            },
            "calls_per_core": carried,
            "ramp_lag_p99_ms": ramp,
            "calls_measured": count,
            "setup": "openai SDK realtime client -> loopback model in a child process; "
            "caller audio up in batches (speech onsets at once, speech 60 ms, quiet 120 ms), "
            "model audio down in 20 ms deltas, as much as the caller sent (delta size is "
            "undocumented: 20 ms is the worst case); playout acked at once",
            "load_average_1m": os.getloadavg()[0],
            "quick": quick,
            "section_seconds": round(time.perf_counter() - started, 1),
        }
    }
