"""`voicehub bench --only offline`: how many offline calls this machine carries in real time.

`voicehub serve` runs the example desks on the embedded offline stack in a subprocess (its
recognizers' worker threads and processes with it); `voicehub soak` callers, with the
soak's usual cadence (a research request, follow-ups, barge-ins, hang-ups, call-backs),
call the research desk for `minutes` at each count of a ramp. A count is carried in real
time when every call was answered, none failed or stayed stuck, and the server's event
loop lag stayed under 50 ms at the 99th percentile (its `voicehub_event_loop_lag_seconds`
histogram, read from /metrics before and after; the figure is the bucket bound the
percentile falls under, so "50" means 25-50 ms). `offline_calls_realtime` is the highest
such count of the ramp (`ramp.Ramp`: rising steps from 2, then the gap to the first count
that fails halved up to twice, so the figure is found on any CPU), then the same soak
runs at twice that count (`at_twice`: with `VOICEHUB_MAX_LOAD` set to the offline stack's
default, which servers with admission use to refuse calls above it).

Also per count: the CPU the server and its worker processes used (in cores), the callers'
process excluded; and the recognizer (`stt`: what the research desk's `stt` resolves to;
`VOICEHUB_BENCH_STT=pocketsphinx` runs the ramp with PocketSphinx instead).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from voicehub_dev.soak import SoakOptions, run_soak
from voicehub_dev.soak.caller import CallerLines
from voicehub_dev.soak.server_process import ServerProcess

LAG_LIMIT = 0.05  # seconds: the loop lag p99 a count must stay under
_LAG_METRIC = "voicehub_event_loop_lag_seconds"
_CHANNELS = Path("channels")


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `offline` section: about 3 minutes with `quick`, 15-40 without."""
    from voicehub.voice.providers.offline.recognizer_load import DEFAULT_MAX_LOAD
    from voicehub_dev.bench.ramp import Ramp

    stt = os.environ.get("VOICEHUB_BENCH_STT", "auto")
    # from a handful (an offline stack on a small machine carries calls by the handful),
    # then the gap to the first count that fails halved twice (`ramp`: 2 minutes a try)
    steps = [4, 8] if quick else [2, 5, 10, 20, 30, 45, 60, 80, 100, 150]
    ramp = Ramp(steps, resolution=0.15, refinements=0 if quick else 2)
    minutes = 0.5 if quick else 2.0
    lines = await asyncio.to_thread(CallerLines.synthesize)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp:
        channels = _channels_with(Path(tmp) / "channels", stt)
        steps_run: list[dict[str, Any]] = []
        while (calls := ramp.next()) is not None:
            step = await soak_at(calls, minutes, channels, lines)
            steps_run.append(step)
            ramp.passed(calls, step["realtime"])
        carried = ramp.figure
        twice = None
        if carried:
            limit = {"VOICEHUB_MAX_LOAD": str(DEFAULT_MAX_LOAD)}
            twice = await soak_at(2 * carried, minutes, channels, lines, environment=limit)
    return {
        "voice": {
            "offline_calls_realtime": carried,
            "offline_load": {
                "stt": stt,
                "criteria": "every call answered, none failed or stuck, loop lag p99 < 50 ms",
                "minutes_per_count": minutes,
                "ramp": steps_run,
                "at_twice": twice,
                "cpus": os.cpu_count(),
                "load_average_1m_end": os.getloadavg()[0],
                "section_seconds": round(time.perf_counter() - started, 1),
            },
        }
    }


async def soak_at(
    calls: int,
    minutes: float,
    channels: Path,
    lines: CallerLines,
    *,
    environment: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One soak of `calls` callers for `minutes` on a fresh server; its figures."""
    saved = {name: os.environ.get(name) for name in environment or {}}
    os.environ.update(environment or {})
    try:
        with tempfile.TemporaryDirectory(prefix="bench-offline-server-") as tmp:
            process = ServerProcess(Path(tmp), channels)
            url = await process.start()
            try:
                lag_before = await _lag_buckets(url)
                cpu_before, wall_before = _tree_cpu_seconds(process.pid), time.monotonic()
                options = SoakOptions(calls=calls, minutes=minutes, url=url)
                result = await run_soak(options, lines=lines)
                cpu = _tree_cpu_seconds(process.pid) - cpu_before
                wall = time.monotonic() - wall_before
                lag_after = await _lag_buckets(url)
            finally:
                await process.stop()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    tally = result.tally
    p99 = _percentile_bound(lag_before, lag_after, 0.99)
    lags = [s.loop_lag_ms for s in result.samples if s.loop_lag_ms is not None]
    realtime = (
        tally.unanswered_calls == 0
        and tally.failed_calls == 0
        and result.stuck_calls == 0
        and p99 is not None
        and p99 <= LAG_LIMIT
    )
    return {
        "calls_at_once": calls,
        "realtime": realtime,
        "calls": tally.calls,
        "unanswered_calls": tally.unanswered_calls,
        "failed_calls": tally.failed_calls,
        "refused_busy": tally.refused_busy,  # not admitted: an answer, not a failure
        "stuck_calls": result.stuck_calls,
        "results_lost": tally.results_lost,
        "loop_lag_p99_ms_at_most": None if p99 is None else round(p99 * 1000),
        "loop_lag_max_ms": max(lags) if lags else None,
        "server_cpu_cores": round(cpu / wall, 2) if wall > 0 else None,
        "failures": dict(tally.failures.most_common(3)),
    }


def _channels_with(folder: Path, stt: str) -> Path:
    """The example desks, with the research desk's recognizer set to `stt`."""
    shutil.copytree(_CHANNELS, folder)
    research = folder / "research.toml"
    text = research.read_text()
    lines = [f'stt = "{stt}"' if line.startswith("stt = ") else line for line in text.splitlines()]
    research.write_text("\n".join(lines) + "\n")
    return folder


async def _lag_buckets(url: str) -> dict[float, float]:
    """The loop-lag histogram's cumulative bucket counts, by upper bound (inf included)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        text = (await http.get("/metrics")).raise_for_status().text
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != _LAG_METRIC:
            continue
        for sample in family.samples:
            if sample.name == f"{_LAG_METRIC}_bucket":
                buckets[float(sample.labels["le"])] = sample.value
    return buckets


def _percentile_bound(
    before: dict[float, float], after: dict[float, float], share: float
) -> float | None:
    """The smallest bucket bound under which `share` of the lags observed between the two
    readings fall (None: no lag observed)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    for bound, count in zip(bounds, counts, strict=True):
        if count >= share * total:
            return bound
    return bounds[-1]


def _tree_cpu_seconds(pid: int | None) -> float:
    """CPU seconds (user and system) of process `pid` and its live children so far."""
    if pid is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        own, parent = int(entry.name), int(fields[1])
        if own == pid or parent == pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total
