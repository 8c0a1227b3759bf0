"""Deliveries per second with two instances on one Redis: two processes, each a hub holding
half of 1,000 idle calls (Immediate strategy, instant playout), both delivering at once.
Every fourth result is handed to the instance that does not hold its call (a result
finished elsewhere), so it travels through the store's announcement to the other one.

Only with `--store redis`: the memory store cannot be shared, and SQLite is one instance's.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
import uuid
from multiprocessing.connection import Connection
from typing import Any

from voicehub.core.clock import SystemClock
from voicehub.delivery.announcements import follow_announcements
from voicehub.delivery.policy import Immediate
from voicehub.hub import Hub, HubInstance
from voicehub.voice.activity import VoiceActivity

CROSS_EVERY = 4  # every fourth result is finished on the other instance


def _owner(room: int) -> int:
    return room % 2


def _deliverer(room: int, round_: int, rooms: int) -> int:
    cross = (round_ * rooms + room) % CROSS_EVERY == 0
    return 1 - _owner(room) if cross else _owner(room)


async def _instance(
    index: int, url: str, prefix: str, rooms: int, per_room: int, pipe: Connection
) -> None:
    from voicehub.core.store.redis import RedisStore
    from voicehub_dev.bench.delivery import _InstantInjector

    clock = SystemClock()
    store = RedisStore(url, prefix=prefix)
    hub = Hub(
        store=store,
        clock=clock,
        delivery_strategy=Immediate(),
        instance=HubInstance(f"i{index}"),
    )
    async with hub:
        follower = asyncio.create_task(follow_announcements(hub.delivery, store, clock))
        injectors = []
        for room in range(rooms):
            if _owner(room) != index:
                continue
            activity = VoiceActivity(clock, session_live=True)
            injector = _InstantInjector(activity, clock)
            injector.expected = per_room
            await hub.delivery.attach(f"tp-{room}", injector, activity)
            injectors.append(injector)
        # Both instances listen before the clock starts: the other one's subscription is
        # only visible in Redis, so poll it.
        while (await store.redis.pubsub_numsub(store.channel))[0][1] < 2:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        pipe.send("ready")
        await asyncio.to_thread(pipe.recv)  # go
        for round_ in range(per_room):
            for room in range(rooms):
                if _deliverer(room, round_, rooms) == index:
                    await hub.deliver(f"tp-{room}", f"result {round_}")
        await asyncio.gather(*(injector.done.wait() for injector in injectors))
        pipe.send("done")
        follower.cancel()


def _process(index: int, url: str, prefix: str, rooms: int, per_room: int, pipe: Any) -> None:
    asyncio.run(_instance(index, url, prefix, rooms, per_room, pipe))


def per_second(url: str, rooms: int = 1000, per_room: int = 5) -> float:
    """Deliveries per second across `rooms` calls held by two instance processes."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters, no shared loop
    prefix = f"bench-two-{uuid.uuid4().hex[:8]}"
    pipes, processes = [], []
    for index in (0, 1):
        mine, theirs = context.Pipe()
        process = context.Process(
            target=_process, args=(index, url, prefix, rooms, per_room, theirs), daemon=True
        )
        process.start()
        theirs.close()  # the child's end: a child that dies then reads as EOF here
        pipes.append(mine)
        processes.append(process)
    try:
        for pipe in pipes:
            if pipe.recv() != "ready":
                raise RuntimeError("a bench instance failed to start")
        started = time.perf_counter()
        for pipe in pipes:
            pipe.send("go")
        for pipe in pipes:
            pipe.recv()
        elapsed = time.perf_counter() - started
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return round(rooms * per_room / elapsed, 1)
