"""Delegation and text-room figures (the foundation issue)."""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import tool
from voicehub.core.channels import TextChannel
from voicehub.core.store.base import Store
from voicehub.core.store.memory import MemoryStore
from voicehub.hub import Hub
from voicehub.orchestration.supervisor import Supervisor
from voicehub_dev.bench.stats import summary_ms


@tool
def look_up(topic: str) -> str:
    """Look a topic up in the notes."""
    return f"three facts about {topic}"


def _worker(agent_id: str) -> Agent:
    llm = ScriptedLLM(
        [
            {
                "regex": r"(?P<topic>.+)",
                "tool": "look_up",
                "arguments": {"topic": "{topic}"},
                "reply": "{result}",
            }
        ]
    )
    return Agent(id=agent_id, llm=llm, tools=(look_up,))


def _supervisor() -> Supervisor:
    boss = Agent(id="boss", llm=ScriptedLLM([{"match": ["*"], "say": "On it."}]))
    return Supervisor(boss, [_worker("analyst-a"), _worker("analyst-b")], strategy="parallel")


def _store(kind: str, folder: Path, name: str) -> Store:
    if kind == "redis":
        from voicehub_dev.bench.redis import bench_redis_store

        return bench_redis_store(name)
    if kind == "sqlite":
        from voicehub.core.store.sqlite import SQLiteStore

        return SQLiteStore(folder / f"{name}.db")
    return MemoryStore()


async def round_trip(kind: str, folder: Path, count: int = 1000) -> dict[str, Any]:
    """One room, `count` sequential delegations to 2 parallel workers."""
    supervisor = _supervisor()
    async with Hub(store=_store(kind, folder, "round_trip"), orchestration=None) as hub:
        room = await hub.create_room("bench")
        for _ in range(50):  # warm-up
            await supervisor.run_workers(hub, room.id, "solar panels")
        durations = []
        for _ in range(count):
            started = time.perf_counter()
            results = await supervisor.run_workers(hub, room.id, "solar panels")
            durations.append(time.perf_counter() - started)
            assert all(r.ok for r in results), results
        return summary_ms(durations)


async def concurrent_rooms(
    kind: str, folder: Path, rooms: int = 100, per_room: int = 20
) -> dict[str, Any]:
    """`rooms` rooms delegating at once; delegations (worker tasks) per second."""
    supervisor = _supervisor()
    async with Hub(store=_store(kind, folder, "concurrent"), orchestration=None) as hub:
        ids = [(await hub.create_room(f"room-{i}")).id for i in range(rooms)]

        async def one_room(room_id: str) -> None:
            for _ in range(per_room):
                await supervisor.run_workers(hub, room_id, "wind power")

        started = time.perf_counter()
        await asyncio.gather(*(one_room(room_id) for room_id in ids))
        elapsed = time.perf_counter() - started
        delegations = rooms * per_room * 2
        return {
            "per_s": round(delegations / elapsed, 1),
            "delegations": delegations,
            "seconds": round(elapsed, 3),
        }


async def retained_bytes(kind: str, folder: Path, count: int = 1000) -> float:
    """Python heap kept per finished delegation (tracemalloc, after a warm-up)."""
    supervisor = _supervisor()
    async with Hub(store=_store(kind, folder, "retained"), orchestration=None) as hub:
        room = await hub.create_room("bench")
        for _ in range(100):
            await supervisor.run_workers(hub, room.id, "tides")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(count // 2):  # each run is 2 delegations
            await supervisor.run_workers(hub, room.id, "tides")
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return round((after - before) / count, 1)


async def text_room(kind: str, folder: Path, count: int = 1000) -> dict[str, Any]:
    """Messages through a text room with a scripted agent reply; cost vs history length."""
    agent = Agent(
        id="desk",
        llm=ScriptedLLM(
            [
                {"regex": r"order (?P<number>\d+)", "say": "Order {number} is on its way."},
                {"match": ["*"], "say": "Tell me your order number."},
            ]
        ),
    )
    async with Hub(store=_store(kind, folder, "text_room"), orchestration=None) as hub:
        room = await hub.create_room("chat")
        text = TextChannel()
        await room.attach(text)
        await room.attach(AgentChannel(agent))
        durations = []
        started = time.perf_counter()
        for i in range(count):
            t0 = time.perf_counter()
            await text.send(room, f"where is order {i}")
            durations.append(time.perf_counter() - t0)
            text.pending(room.id)
        elapsed = time.perf_counter() - started
        tenth = max(1, count // 10)
        return {
            "msgs_per_s": round(count / elapsed, 1),
            "ms_first_10pct": round(1000 * sum(durations[:tenth]) / tenth, 4),
            "ms_last_10pct": round(1000 * sum(durations[-tenth:]) / tenth, 4),
        }


async def store_work(folder: Path, count: int = 200) -> dict[str, Any]:
    """SQLite statements (BEGIN and COMMIT included) and commits per round trip and per
    full path (tool call to its result settled): the store's work without timing noise."""
    from voicehub.core.store.sqlite import SQLiteStore
    from voicehub_dev.bench.full_path import scripted_call

    async def per_trip(store: SQLiteStore, trips: Callable[[], Awaitable[None]]) -> Any:
        for _ in range(3):  # the last turn's group commit
            await asyncio.sleep(0)
        statements, commits = store.statements, store.commits
        await trips()
        for _ in range(3):
            await asyncio.sleep(0)
        return {
            "statements": round((store.statements - statements) / count, 2),
            "commits": round((store.commits - commits) / count, 2),
        }

    supervisor = _supervisor()
    store = SQLiteStore(folder / "store_work.db")
    async with Hub(store=store, orchestration=None) as hub:
        room = await hub.create_room("bench")

        async def round_trips() -> None:
            for _ in range(count):
                await supervisor.run_workers(hub, room.id, "solar panels")

        await supervisor.run_workers(hub, room.id, "solar panels")  # counts its tasks once
        work = {"round_trip": await per_trip(store, round_trips)}
    async with scripted_call("sqlite", folder) as (hub, delegate):
        assert isinstance(hub.store, SQLiteStore)

        async def full_paths() -> None:
            for n in range(count):
                await delegate(f"call-{n}")

        await delegate("warm-up")
        work["full_path"] = await per_trip(hub.store, full_paths)
    return work


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """All foundation figures. `store` is the store the figures are measured on."""
    from voicehub_dev.bench.full_path import full_path  # it builds on this module's agents

    n = 200 if quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        delegation = {
            "store": store,
            "round_trip_ms": await round_trip(store, folder, n),
            "full_path_ms": await full_path(store, folder, n),
            "concurrent_100_rooms": await concurrent_rooms(
                store, folder, per_room=5 if quick else 20
            ),
            "retained_bytes_per_finished": await retained_bytes(store, folder, n),
        }
        if store == "sqlite":
            delegation["sqlite_per_trip"] = await store_work(folder)
        text = await text_room(store, folder, n)
    return {"delegation": delegation, "text_room": {"store": store, **text}}
