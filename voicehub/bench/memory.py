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
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path
from typing import Any

from voicehub.client.call import CallOptions, caller_audio, place_call
from voicehub.client.soak.server_process import ServerProcess

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


async def _peak(process: ServerProcess, seen: list[float]) -> None:
    while True:
        rss = process.rss_mb()
        if rss is not None:
            seen.append(rss)
        await asyncio.sleep(0.5)


async def measure(folder: Path, sequential: int, bursts: int, burst_calls: int) -> dict[str, Any]:
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
    }


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `memory` section (the server uses its SQLite store whatever `store` says)."""
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as folder:
        if quick:
            figures = await measure(Path(folder), sequential=30, bursts=2, burst_calls=4)
        else:
            figures = await measure(Path(folder), sequential=1000, bursts=5, burst_calls=8)
    return {"memory": figures}
