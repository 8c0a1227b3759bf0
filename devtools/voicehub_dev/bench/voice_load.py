"""Many paced calls on one event loop: CPU per frame and event-loop lag.

Every call gets one 20 ms frame every 20 ms on the real clock (absolute deadlines: a late
wake-up is caught up, never skipped). Calls start at random moments within the first
second and at a random point of the caller's pattern, as real calls arrive: their turns
and livekit's once-a-second VAD metrics do not line up. CPU is process CPU time
(`time.process_time`, all threads) over a window that excludes start-up and close (the
calls' sessions are started, and collected once, before the first frame); lag is how late a
10 ms sleeper wakes up in that window.

Three variants run the same paced loop: "harness" (no session: pacing and hand-over),
"bare" (a livekit `AgentSession` with minimal I/O) and "framework" (voicehub's pipeline
session in a hub room). `plugins` says whether calls share one STT, TTS and VAD object (the
offline voice stack shares the models behind them) or get one each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.store.base import Store
from voicehub.hub import Hub
from voicehub.voice.audio import frame_bytes
from voicehub.voice.providers.offline import load_vad
from voicehub_dev.bench.stats import percentile
from voicehub_dev.bench.wakeups import WakeupCounter
from voicehub_dev.fakes.voice_providers import (
    REPLY_TEXT,
    BareCall,
    FakeLLM,
    FakeSTT,
    FakeTTS,
    VoicehubCall,
)

Variant = Literal["harness", "bare", "framework"]
Plugins = Literal["shared", "per-call"]

TICK = 0.02
FRAME = frame_bytes(16000)
STAGGER = 1.0  # calls start within this many seconds: the settle time must cover it
LAG_LIMIT_MS = 20.0


class Call(Protocol):
    """What the paced loop drives."""

    async def start(self) -> None: ...

    async def push(self, pcm16: bytes) -> None: ...

    async def aclose(self) -> None: ...

    def replies(self) -> int: ...


class HarnessCall:
    """No session: what pacing and handing a frame over cost by themselves."""

    def __init__(self) -> None:
        self.frames = 0

    async def start(self) -> None:
        """Nothing to start."""

    async def push(self, pcm16: bytes) -> None:
        """Count the frame."""
        self.frames += len(pcm16) // FRAME

    async def aclose(self) -> None:
        """Nothing to close."""

    def replies(self) -> int:
        """Never replies (and never should)."""
        return 0


@dataclass(frozen=True)
class Window:
    """What one paced run measured after its settle time."""

    cpu_s: float
    wall_s: float
    frames: int
    calls: int
    lags: list[float]
    steal_pct: float | None  # CPU the hypervisor gave to other guests (None: unknown)
    silent_calls: int = 0  # calls that never got a reply although they had a whole turn
    wakeups: int | None = None  # event-loop callbacks run in the window, when counted
    loop_cpu_s: float = 0.0  # CPU of the event loop's thread alone (not the VAD's threads)

    @property
    def us_per_frame(self) -> float:
        """Process CPU per frame per call, in microseconds."""
        return self.cpu_s / max(self.frames, 1) * 1e6

    @property
    def loop_us_per_frame(self) -> float:
        """The event loop thread's CPU per frame per call, in microseconds: what decides
        its lag (batched inference runs on other threads)."""
        return self.loop_cpu_s / max(self.frames, 1) * 1e6

    @property
    def lag_p99_ms(self) -> float:
        """99th percentile of the loop's wake-up delay."""
        return percentile(self.lags, 0.99) * 1000

    @property
    def busy_pct(self) -> float:
        """CPU time over wall time (100 = one core; native threads can add more)."""
        return 100.0 * self.cpu_s / self.wall_s

    @property
    def delivered_pct(self) -> float:
        """Frames pushed against what the clock asked for (below 100: falling behind)."""
        return 100.0 * self.frames * TICK / (self.calls * self.wall_s)


async def pace(
    calls: Sequence[Call],
    pattern: Sequence[bytes],
    settle: float,
    measure: float,
    seed: int,
    *,
    count_wakeups: bool = False,
) -> Window:
    """Feed each call `pattern` (looped) for `settle + measure` s; measure the last part
    (with `count_wakeups`, also the loop's wake-ups in it)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    start = loop.time() + 0.05
    end = start + settle + measure
    pushed = 0

    async def feed(call: Call, first: float, offset: int) -> None:
        nonlocal pushed
        k = 0
        while (at := first + k * TICK) < end:
            if (delay := at - loop.time()) > 0:
                await asyncio.sleep(delay)
            await call.push(pattern[(offset + k) % len(pattern)])
            pushed += 1
            k += 1

    lags: list[float] = []

    async def tick() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - before - 0.01)

    feeders = [
        asyncio.create_task(
            feed(call, start + rng.uniform(0, STAGGER), rng.randrange(len(pattern)))
        )
        for call in calls
    ]
    await asyncio.sleep(start + settle - loop.time())
    ticker = asyncio.create_task(tick())
    counter = WakeupCounter()
    cpu, wall, frames, steal = time.process_time(), time.perf_counter(), pushed, cpu_steal_ticks()
    loop_cpu = time.thread_time()
    if count_wakeups:
        with counter:
            await asyncio.sleep(max(0.0, end - loop.time()))
    else:
        await asyncio.sleep(max(0.0, end - loop.time()))
    cpu, wall, frames = time.process_time() - cpu, time.perf_counter() - wall, pushed - frames
    loop_cpu = time.thread_time() - loop_cpu
    steal_pct = steal_pct_between(steal, cpu_steal_ticks())
    ticker.cancel()
    await asyncio.gather(*feeders)  # a failing push surfaces here
    wakeups = counter.count if count_wakeups else None
    return Window(
        cpu, wall, frames, len(calls), lags, steal_pct, wakeups=wakeups, loop_cpu_s=loop_cpu
    )


def cpu_steal_ticks() -> tuple[int, int] | None:
    """(steal, total) CPU ticks of the whole machine from /proc/stat (Linux), else None."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (ticks[7], sum(ticks[:8])) if len(ticks) >= 8 else None


def steal_pct_between(
    before: tuple[int, int] | None, after: tuple[int, int] | None
) -> float | None:
    """Percent of the machine's CPU time stolen by the hypervisor between two readings: on
    a shared VM it stalls the loop without showing in the load average."""
    if before is None or after is None or after[1] == before[1]:
        return None
    return round(100.0 * (after[0] - before[0]) / (after[1] - before[1]), 1)


@dataclass
class Load:
    """Runs paced calls of one variant; `store` builds each run's hub store."""

    store: Callable[[str], Store]
    pattern: list[bytes]
    runs: int = 0
    vad: Callable[[], Any] | None = None  # a VAD per call; None: WebRTC's
    # more options for voicehub's sessions (e.g. the turn policy and its end-of-turn model)
    session_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def cycle(self) -> float:
        """Length of the caller's pattern (one turn), in seconds."""
        return len(self.pattern) * TICK

    async def run(
        self,
        variant: Variant,
        count: int,
        settle: float,
        measure: float,
        plugins: Plugins,
        *,
        seed: int = 0,
        all_reply: bool = True,
        count_wakeups: bool = False,
    ) -> Window:
        """`count` calls of `variant`, started, paced, then closed; errors surface.

        `seed` fixes the calls' start times and pattern offsets (variants compared with the
        same seed see the same traffic). With `all_reply`, a call that had a whole turn
        but got no reply is an error (an overloaded loop may legitimately starve calls:
        the ramp only counts them)."""
        if settle < STAGGER:
            raise ValueError(f"settle ({settle} s) must cover the start stagger ({STAGGER} s)")
        self.runs += 1
        hub = Hub(store=self.store(f"load-{self.runs}"))
        await hub.start()
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback=REPLY_TEXT))
        shared = _providers(self.vad)
        calls: list[Call] = []
        for i in range(count):
            providers = shared if plugins == "shared" else _providers(self.vad)
            if variant == "harness":
                calls.append(HarnessCall())
            elif variant == "bare":
                calls.append(BareCall(llm=FakeLLM(), **providers))
            else:
                calls.append(
                    VoicehubCall(hub, f"call-{i}", agent, **providers, **self.session_options)
                )
        try:
            await asyncio.gather(*(call.start() for call in calls))
            # The calls' objects, made all at once, would otherwise make the collector's
            # first full collections (long, at hundreds of calls) fall in the window:
            # start-up work, which a server taking calls one by one spreads out.
            gc.collect()
            window = await pace(
                calls, self.pattern, settle, measure, seed, count_wakeups=count_wakeups
            )
            if variant != "harness" and settle + measure >= STAGGER + self.cycle + 1.0:
                silent = sum(1 for call in calls if call.replies() == 0)
                if silent and all_reply:  # each call had a whole turn: each must answer
                    raise RuntimeError(f"{variant}: {silent} of {count} calls never replied")
                window = dataclasses.replace(window, silent_calls=silent)
        finally:
            await asyncio.gather(*(call.aclose() for call in calls))
            await hub.aclose()
        gc.collect()  # the next run starts clean (outside any window)
        return window


def _providers(vad: Callable[[], Any] | None = None) -> dict[str, Any]:
    # the fakes and WebRTC's detector are cheap to build: one per call costs nothing
    return {"stt": FakeSTT(), "tts": FakeTTS(), "vad": vad() if vad else load_vad("webrtc")}


async def overhead(
    load: Load, count: int, rounds: int, settle: float, measure: float, plugins: Plugins
) -> dict[str, Any]:
    """CPU per frame per call for the three variants, alternated `rounds` times in a
    rotating order (the machine is shared and noisy); medians, and every run."""
    variants: list[Variant] = ["harness", "bare", "framework"]
    samples: dict[str, list[float]] = {name: [] for name in variants}
    lags: dict[str, list[float]] = {name: [] for name in variants}
    steal: list[float] = []
    for round_ in range(rounds):
        for name in variants[round_ % 3 :] + variants[: round_ % 3]:
            window = await load.run(name, count, settle, measure, plugins, seed=round_)
            samples[name].append(window.us_per_frame)
            lags[name].append(window.lag_p99_ms)
            if window.steal_pct is not None:
                steal.append(window.steal_pct)
    us = {name: statistics.median(values) for name, values in samples.items()}
    paired = [  # each round's own ratio: drift in the machine's load cancels out
        (frame - bare) / bare * 100
        for frame, bare in zip(samples["framework"], samples["bare"], strict=True)
    ]
    return {
        "harness_us_per_frame": round(us["harness"], 1),
        "bare_agentsession_us_per_frame": round(us["bare"], 1),
        "framework_us_per_frame": round(us["framework"], 1),
        "framework_overhead_pct": round((us["framework"] - us["bare"]) / us["bare"] * 100, 1),
        "framework_overhead_pct_per_round": [round(pct, 1) for pct in paired],
        "overhead_runs_us_per_frame": {
            name: [round(v, 1) for v in values] for name, values in samples.items()
        },
        "overhead_lag_p99_ms": {name: round(statistics.median(v), 2) for name, v in lags.items()},
        "overhead_cpu_steal_pct_max": max(steal, default=None),
        "overhead_setup": {
            "calls": count,
            "rounds": rounds,
            "seconds_measured": measure,
            "plugins": plugins,
        },
    }


async def wakeups_per_frame(
    load: Load, count: int, settle: float, measure: float, plugins: Plugins
) -> dict[str, Any]:
    """Event-loop wake-ups per 20 ms frame per call: the pacing harness alone, and the
    framework; their difference is what the session's audio path costs."""
    runs = {
        variant: await load.run(variant, count, settle, measure, plugins, count_wakeups=True)
        for variant in ("harness", "framework")
    }
    per_frame = {
        name: (window.wakeups or 0) / max(window.frames, 1) for name, window in runs.items()
    }
    return {
        "wakeups_per_frame": {
            "harness": round(per_frame["harness"], 2),
            "framework": round(per_frame["framework"], 2),
            "session_path": round(per_frame["framework"] - per_frame["harness"], 2),
            "calls": count,
        }
    }


async def calls_per_core(
    load: Load,
    steps: Sequence[int],
    settle: float,
    measure: float,
    plugins: Plugins,
    *,
    tries: int = 2,
    refinements: int = 4,
) -> dict[str, Any]:
    """Ramp voicehub calls (`ramp.Ramp`: `steps`, then up to `refinements` halvings of the
    gap to the first count that fails) and report the largest healthy count: loop lag p99
    under 20 ms, and no call that never replied although it had a whole turn. Per count:
    lag p99, CPU per frame, core use, frames kept, calls without reply and the machine's
    CPU steal. A failing count is tried again, up to `tries` times in all (a shared VM
    stalls now and then), and keeps its best try; every try is in the detail. A first step
    that fails is refined towards zero, so a slower CPU than the steps were chosen for
    still gets its figure."""
    from voicehub_dev.bench.ramp import Ramp

    ramp = Ramp(steps, refinements=refinements)
    table: dict[str, dict[str, Any]] = {}
    while (count := ramp.next()) is not None:
        runs: list[Window] = []
        while len(runs) < tries and (not runs or not _healthy(runs[-1])):
            runs.append(
                await load.run(
                    "framework", count, settle, measure, plugins, seed=count, all_reply=False
                )
            )
        window = min(runs, key=lambda w: (not _healthy(w), w.lag_p99_ms))
        table[str(count)] = {
            "lag_p99_ms": round(window.lag_p99_ms, 2),
            "lag_p99_ms_tries": [round(w.lag_p99_ms, 2) for w in runs],
            "us_per_frame": round(window.us_per_frame, 1),
            "loop_us_per_frame": round(window.loop_us_per_frame, 1),
            "cpu_busy_pct": round(window.busy_pct, 1),
            "frames_delivered_pct": round(window.delivered_pct, 1),
            "calls_without_reply": window.silent_calls,
            "cpu_steal_pct": window.steal_pct,
        }
        ramp.passed(count, _healthy(window))
    return {
        "calls_per_core": ramp.figure,
        "calls_ramp": {n: row["lag_p99_ms"] for n, row in table.items()},
        "calls_ramp_detail": table,
        "calls_setup": {"seconds_measured": measure, "plugins": plugins, "tries": tries},
    }


def _healthy(window: Window) -> bool:
    return window.lag_p99_ms < LAG_LIMIT_MS and not window.silent_calls


def sqlite_or_memory(kind: str, folder: Path) -> Callable[[str], Store]:
    """A store factory for `kind` ("sqlite" files in `folder`, else in memory)."""

    def build(name: str) -> Store:
        if kind == "sqlite":
            from voicehub.core.store.sqlite import SQLiteStore

            return SQLiteStore(folder / f"{name}.db")
        from voicehub.core.store.memory import MemoryStore

        return MemoryStore()

    return build
