"""`voicehub bench --only memory`: the server's memory per call, measured from outside.

`voicehub serve` runs as a subprocess on a free port (the callers' memory does not count)
and its RSS is read from /proc:

- `rss_mb_fresh`: after start-up and one warm-up call (models loaded, caches warm).
- `sequential_calls` short calls one after another over the WebSocket: greet, hang up;
  every tenth asks for research and waits for the results (child rooms, tasks, deliveries).
  `rss_mb_after_sequential` at the end; `kb_per_ended_call` is the growth from the first
  tenth of the calls to the end, per call (allocator noise is a few KB per call).
- `bursts` of `burst_calls` research calls at once: `rss_mb_after_bursts` after them, and
  `rss_mb_peak` the most seen while they ran.
- `idle_calls` calls open at once, greeted, the caller silent: `rss_mb_idle_calls` with
  them all live, and `mb_per_idle_call` over the RSS before them. (Before PocketSphinx
  decoders were lent per utterance, each live call held one: about 85 MB.)
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path
from typing import Any

from voicehub.client.call import CallClient, CallOptions, caller_audio, place_call
from voicehub_dev.soak.server_process import ServerProcess

REQUEST = "could you research heat pumps for me please"


async def _call(server: str, conversation: str, speech: bytes | None) -> None:
    options = CallOptions(
        desk="research",
        server=server,
        conversation=conversation,
        realtime=False,  # bursts of caller audio: the figure is memory, not timing
        playout_speed=math.inf,
        turn_timeout=15.0,
    )
    lines = [("research", speech)] if speech is not None else []
    await place_call(options, lines, settle_timeout=30.0 if speech else 0.0)


async def idle_calls(process: ServerProcess, server: str, count: int) -> dict[str, Any]:
    """RSS with `count` live calls whose callers say nothing after the greeting."""
    before = process.rss_mb() or 0.0
    clients = [
        CallClient(
            CallOptions(
                desk="research",
                server=server,
                conversation=f"idle-{number}",
                playout_speed=math.inf,
                turn_timeout=120.0,
            )
        )
        for number in range(count)
    ]
    try:
        for client in clients:  # one by one: the figure is memory, not a rush of greetings
            await client.connect()
        await asyncio.gather(*(client.wait_for_turn() for client in clients))
        live = process.rss_mb() or 0.0
    finally:
        await asyncio.gather(*(client.hangup() for client in clients), return_exceptions=True)
    return {
        "idle_calls": count,
        "rss_mb_idle_calls": round(live, 1),
        "mb_per_idle_call": round((live - before) / count, 2),
    }


async def _peak(process: ServerProcess, seen: list[float]) -> None:
    while True:
        rss = process.rss_mb()
        if rss is not None:
            seen.append(rss)
        await asyncio.sleep(0.5)


async def measure(
    folder: Path, sequential: int, bursts: int, burst_calls: int, idle: int = 0
) -> dict[str, Any]:
    speech = await asyncio.to_thread(caller_audio, text=REQUEST)
    process = ServerProcess(folder)
    server = await process.start()
    try:
        await _call(server, "warm-up", speech)
        fresh = process.rss_mb() or 0.0
        mark = fresh
        tenth = max(1, sequential // 10)
        for number in range(sequential):
            await _call(server, f"seq-{number}", speech if number % 10 == 9 else None)
            if number + 1 == tenth:
                mark = process.rss_mb() or 0.0
        after_sequential = process.rss_mb() or 0.0
        growth_calls = max(1, sequential - tenth)
        seen: list[float] = []
        sampler = asyncio.create_task(_peak(process, seen))
        for burst in range(bursts):
            await asyncio.gather(
                *(_call(server, f"burst-{burst}-{n}", speech) for n in range(burst_calls))
            )
        sampler.cancel()
        after_bursts = process.rss_mb() or 0.0
        idle_figures = await idle_calls(process, server, idle) if idle else {}
    finally:
        await process.stop()
    return {
        "rss_mb_fresh": round(fresh, 1),
        "sequential_calls": sequential,
        "rss_mb_after_sequential": round(after_sequential, 1),
        "kb_per_ended_call": round((after_sequential - mark) * 1000 / growth_calls, 1),
        "bursts": bursts,
        "burst_calls": burst_calls,
        "rss_mb_after_bursts": round(after_bursts, 1),
        "rss_mb_peak": round(max([after_bursts, *seen]), 1),
        **idle_figures,
    }


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `memory` section (the server uses its SQLite store whatever `store` says)."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as folder:
        if quick:
            figures = await measure(Path(folder), 30, bursts=2, burst_calls=4, idle=10)
        else:
            figures = await measure(Path(folder), 1000, bursts=5, burst_calls=8, idle=100)
    return {"memory": figures}
