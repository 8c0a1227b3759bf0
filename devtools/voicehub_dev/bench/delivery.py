"""Delivery figures: lag after idle onset beyond the buffer, and throughput over many rooms."""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from voicehub.core.clock import SystemClock
from voicehub.core.store.base import Store
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import Immediate, WaitForIdle
from voicehub.hub import Hub
from voicehub.voice.activity import VoiceActivity
from voicehub_dev.bench.stats import summary_ms


class _InstantInjector:
    """Records when each injection starts; the speech 'plays' at once."""

    def __init__(self, activity: VoiceActivity, clock: SystemClock) -> None:
        self.activity = activity
        self.clock = clock
        self.started: list[float] = []
        self.done = asyncio.Event()
        self.expected = 0

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        self.started.append(self.clock.now())
        if len(self.started) >= self.expected:
            self.done.set()
        return InjectOutcome.FINISHED


def _store(kind: str, folder: Path, name: str) -> Store:
    if kind == "redis":
        from voicehub_dev.bench.redis import bench_redis_store

        return bench_redis_store(name)
    if kind == "sqlite":
        from voicehub.core.store.sqlite import SQLiteStore

        return SQLiteStore(folder / f"{name}.db")
    return MemoryStore()


async def lag_beyond_buffer(
    kind: str, folder: Path, rooms: int = 200, rounds: int = 5, buffer: float = 0.2
) -> dict[str, float]:
    """Independent calls: in each, the caller talks while a result arrives, then stops. How
    long after `idle onset + buffer` does the injection start? Real event loop, real clock.
    Calls are staggered (seeded random gaps) as real calls are, not synchronised."""
    clock = SystemClock()
    lags: list[float] = []
    rng = random.Random(7)
    async with Hub(
        store=_store(kind, folder, "lag"), clock=clock, delivery_strategy=WaitForIdle(buffer=buffer)
    ) as hub:

        async def call(index: int) -> None:
            room = await hub.create_room(f"lag-{index}", orchestration=None)
            activity = VoiceActivity(clock, session_live=True)
            injector = _InstantInjector(activity, clock)
            await hub.delivery.attach(room.id, injector, activity)
            await asyncio.sleep(rng.uniform(0, 1.0))
            for round_ in range(rounds):
                injector.expected = round_ + 1
                injector.done.clear()
                activity.user_speech_started()
                await hub.deliver(room.id, f"result {round_}")
                await asyncio.sleep(rng.uniform(0.05, 0.3))
                activity.user_speech_stopped()
                onset = clock.now()
                await injector.done.wait()
                lags.append(injector.started[-1] - (onset + buffer))
                await asyncio.sleep(rng.uniform(0.1, 0.5))

        await asyncio.gather(*(call(i) for i in range(rooms)))
    return summary_ms(lags)


async def per_second(kind: str, folder: Path, rooms: int = 1000, per_room: int = 5) -> float:
    """Deliveries per second across `rooms` idle rooms (Immediate strategy, instant playout)."""
    clock = SystemClock()
    async with Hub(
        store=_store(kind, folder, "throughput"), clock=clock, delivery_strategy=Immediate()
    ) as hub:
        injectors = []
        for i in range(rooms):
            room = await hub.create_room(f"tp-{i}", orchestration=None)
            activity = VoiceActivity(clock, session_live=True)
            injector = _InstantInjector(activity, clock)
            injector.expected = per_room
            await hub.delivery.attach(room.id, injector, activity)
            injectors.append((room.id, injector))
        started = time.perf_counter()
        for n in range(per_room):
            for room_id, _ in injectors:
                await hub.deliver(room_id, f"result {n}")
        await asyncio.gather(*(inj.done.wait() for _, inj in injectors))
        elapsed = time.perf_counter() - started
    return round(rooms * per_room / elapsed, 1)


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lag = await lag_beyond_buffer(store, folder, rounds=2 if quick else 5)
        rate = await per_second(store, folder, per_room=2 if quick else 5)
    figures: dict[str, Any] = {
        "store": store,
        "lag_beyond_buffer_ms": lag,
        "per_s_1000_rooms": rate,
    }
    if store == "redis":  # several instances share only a Redis store
        from voicehub_dev.bench.redis import bench_redis_url
        from voicehub_dev.bench.two_instances import per_second as two_instances_per_second

        figures["two_instances_per_s_1000_rooms"] = await asyncio.to_thread(
            two_instances_per_second, bench_redis_url(), per_room=2 if quick else 5
        )
    return {"delivery": figures}
