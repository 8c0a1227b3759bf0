"""A worker writing to its child room while the store is away for a moment (a Redis restart, a
SQLite file locked by another process): the work goes on and each event is stored once, even
a write that landed but whose answer was lost. Past `STORE_OUTAGE_SECONDS` the task fails,
and what the caller may hear of it names no URL, host, port, file or class."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.core.test_store_contract import sentinel_set, store
from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool
from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event
from voicehub.core.store.base import RoomRecord, Store, TaskRecord, TaskStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.core.store.outage import STORE_OUTAGE_SECONDS
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore, schema
from voicehub.errors import StoreError, StoreUnavailableError
from voicehub.hub import Hub
from voicehub.orchestration.delegation import (
    INTERNAL_REASON,
    STORE_REASON,
    TaskHandle,
    TaskResult,
)
from voicehub.orchestration.recovery import LOST_REASON
from voicehub.orchestration.recovery import _result as recovered
from voicehub.orchestration.supervisor import combine
from voicehub_dev.fakes.redis_server import redis_server, running_redis, unique_prefix

__all__ = ["redis_server", "sentinel_set", "store"]  # the fixtures, imported for pytest

SECRET_URL = "redis://default:s3cret@10.0.0.5:6380/0"
UNSPEAKABLE = ("redis", "10.0.0.5", "6380", "s3cret", "Error", "hub.db", "127.0.0.1")


def away_for(
    monkeypatch: pytest.MonkeyPatch,
    store: Store,
    writes: int,
    *,
    landing: bool = False,
    error: type[StoreError] = StoreUnavailableError,
) -> list[Event]:
    """Make the store raise `error` on the next `writes` events of a worker's child room,
    after storing them when `landing` (the answer is lost on the way back). Returns the
    events it refused, as they came."""
    append: Callable[[Event], Awaitable[None]] = store.append_event
    refused: list[Event] = []

    async def append_event(event: Event) -> None:
        if "::task-" not in event.room_id or len(refused) >= writes:
            await append(event)
            return
        refused.append(event)
        if landing:
            await append(event)
        raise error(f"Redis store {SECRET_URL} failed: ConnectionError: Connection reset")

    monkeypatch.setattr(store, "append_event", append_event)
    return refused


def looking_up(tool: Tool) -> Agent:
    llm = ScriptedLLM([{"match": ["*"], "tool": tool.name, "reply": "{result}"}])
    return Agent(id="researcher", llm=llm, tools=(tool,))


async def found() -> str:
    return "the tide turns at six"


async def finished(handle: TaskHandle, clock: VirtualClock, step: float = 0.02) -> TaskResult:
    await until(
        handle.done, clock=clock, step=step, poll=0.005, virtual_limit=STORE_OUTAGE_SECONDS + 5
    )
    return await handle.result()


async def assert_stored_once(store: Store, room_id: str) -> list[Event]:
    events = await store.list_events(room_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.id for e in events}) == len(events)
    return events


@pytest.mark.parametrize("landing", [False, True], ids=["refused", "answer-lost"])
async def test_a_worker_rides_out_a_store_away_for_a_few_writes(
    store: Store, monkeypatch: pytest.MonkeyPatch, landing: bool
) -> None:
    clock = VirtualClock()
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    refused = away_for(monkeypatch, store, 4, landing=landing)

    handle = await hub.delegate(looking_up(Tool(found)), "when does the tide turn?", "call")
    result = await finished(handle, clock)

    assert (result.status, result.output) == (TaskStatus.OK, "the tide turns at six")
    assert len(refused) == 4
    events = await assert_stored_once(store, handle.child_room_id)
    assert {e.id for e in refused} <= {e.id for e in events}  # retried as they were
    assert events[-1].text == "the tide turns at six"
    assert clock.now() < 5  # a few short waits, not the whole allowance
    record = await store.get_task(handle.task_id)
    assert record is not None and record.status is TaskStatus.OK


@pytest.mark.parametrize("landing", [False, True], ids=["refused", "answer-lost"])
async def test_a_worker_whose_room_opens_while_the_store_is_away_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch, landing: bool
) -> None:
    clock = VirtualClock()
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    create = store.create_room
    refused: list[str] = []

    async def create_room(record: RoomRecord) -> None:
        if "::task-" in record.id and len(refused) < 3:
            refused.append(record.id)
            if landing:
                await create(record)
            raise StoreUnavailableError(f"Redis store {SECRET_URL} failed: Connection reset")
        await create(record)

    monkeypatch.setattr(store, "create_room", create_room)
    handle = await hub.delegate(looking_up(Tool(found)), "when does the tide turn?", "call")
    result = await finished(handle, clock)

    assert (result.status, result.output) == (TaskStatus.OK, "the tide turns at six")
    assert refused == [handle.child_room_id] * 3
    assert await store.get_room(handle.child_room_id) is not None
    await assert_stored_once(store, handle.child_room_id)


async def test_past_the_allowance_the_task_fails_with_a_reason_a_caller_may_hear(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    away_for(monkeypatch, store, 10_000)

    handle = await hub.delegate(looking_up(Tool(found)), "when does the tide turn?", "call")
    with caplog.at_level(logging.ERROR, logger="voicehub.delegation"):
        result = await finished(handle, clock, step=0.5)

    assert result.status is TaskStatus.FAILED
    # given up at the allowance; the clock moves on 0.5 s each 5 ms of real time while the
    # failure's own record is written (a round trip to a replica too on a Sentinel store)
    assert STORE_OUTAGE_SECONDS - 1.5 <= clock.now() <= STORE_OUTAGE_SECONDS + 1.0
    assert result.reason == STORE_REASON
    record = await store.get_task(handle.task_id)
    assert record is not None and record.reason == STORE_REASON  # recovery speaks it too
    for spoken in (result.describe(), combine([result]), record.reason):
        for word in UNSPEAKABLE:
            assert word not in spoken, (word, spoken)
    # Operators still get the whole story: the log and the result's detail.
    assert "10.0.0.5:6380" in result.detail and "StoreUnavailableError" in result.detail
    assert any(r.exc_info and "10.0.0.5:6380" in str(r.exc_info[1]) for r in caplog.records)


async def test_a_store_error_that_will_not_pass_fails_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, store = VirtualClock(), MemoryStore()
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    away_for(monkeypatch, store, 1, error=StoreError)  # say, a corrupt file

    handle = await hub.delegate(looking_up(Tool(found)), "when does the tide turn?", "call")
    result = await asyncio.wait_for(handle.result(), 5)  # a guard: no clock time needed
    assert (result.status, result.reason) == (TaskStatus.FAILED, STORE_REASON)
    assert clock.now() == 0


async def test_a_worker_rides_out_a_real_redis_restart() -> None:
    clock = VirtualClock()
    with running_redis() as server:
        store = RedisStore(server.url, prefix=unique_prefix())
        hub = Hub(store=store, clock=clock)
        await hub.create_room("call")

        async def look_up_while_redis_restarts() -> str:
            server.stop()  # SIGTERM, as the bench's redis_restarted fault
            return "the tide turns at six"

        tool = Tool(look_up_while_redis_restarts)
        handle = await hub.delegate(looking_up(tool), "when does the tide turn?", "call")
        # The tool's result is the next event: it waits on the clock for Redis to come back.
        await until(lambda: clock.next_deadline() is not None, what="a write waiting to retry")
        assert not handle.done()
        await asyncio.to_thread(server.start)  # same port, same AOF
        result = await finished(handle, clock)

        assert (result.status, result.output) == (TaskStatus.OK, "the tide turns at six")
        events = await assert_stored_once(store, handle.child_room_id)
        assert events[-1].text == "the tide turns at six"
        await store.close()


async def test_a_worker_rides_out_a_sqlite_file_locked_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "BUSY_TIMEOUT_SECONDS", 0.01)  # not 5 s of blocking per try
    path = tmp_path / "hub.db"
    clock, store = VirtualClock(), SQLiteStore(path)
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    locked = asyncio.Event()

    async def look_up_while_the_file_is_locked() -> str:
        await asyncio.sleep(0)  # the group commit of the events so far runs first
        other.execute("BEGIN IMMEDIATE")  # another process writing: holds the write lock
        locked.set()
        return "the tide turns at six"

    tool = Tool(look_up_while_the_file_is_locked)
    handle = await hub.delegate(looking_up(tool), "when does the tide turn?", "call")
    await locked.wait()
    await until(lambda: clock.next_deadline() is not None, what="a write waiting to retry")
    other.execute("INSERT INTO tokens (id, data) VALUES ('t', '{}')")
    other.execute("COMMIT")  # it wrote and let go
    other.close()
    result = await finished(handle, clock)

    assert (result.status, result.output) == (TaskStatus.OK, "the tide turns at six")
    events = await assert_stored_once(store, handle.child_room_id)
    assert events[-1].text == "the tide turns at six"
    await store.close()


async def test_a_task_record_written_but_whose_answer_was_lost_counts_as_written(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The finishing write landed and Redis went away before answering: retried, the
    # compare-and-set is refused by that very write, which must not read as a takeover.
    clock = VirtualClock()
    hub = Hub(store=store, clock=clock)
    await hub.create_room("call")
    swap = store.swap_task
    lost: list[TaskStatus] = []

    async def swap_task(task: TaskRecord, *, expected_fence: int) -> bool:
        written = await swap(task, expected_fence=expected_fence)
        if task.status is TaskStatus.OK and not lost:
            lost.append(task.status)
            raise StoreUnavailableError(f"Redis store {SECRET_URL} failed: TimeoutError")
        return written

    monkeypatch.setattr(store, "swap_task", swap_task)
    handle = await hub.delegate(looking_up(Tool(found)), "when does the tide turn?", "call")
    result = await finished(handle, clock)

    assert lost == [TaskStatus.OK]
    assert (result.status, result.taken_over) == (TaskStatus.OK, False)
    record = await store.get_task(handle.task_id)
    assert record is not None
    assert (record.status, record.output) == (TaskStatus.OK, "the tide turns at six")


@pytest.mark.parametrize(
    ("stored", "spoken"),
    [
        (f"StoreError: Redis store {SECRET_URL} failed: ConnectionError: refused", STORE_REASON),
        ("RuntimeError: model endpoint http://10.0.0.5:8000 is down", INTERNAL_REASON),
        (LOST_REASON, LOST_REASON),
        (STORE_REASON, STORE_REASON),
    ],
)
def test_recovery_never_speaks_an_exception_an_older_version_stored(
    stored: str, spoken: str
) -> None:
    record = TaskRecord(
        id="call::task-1",
        parent_room_id="call",
        child_room_id="call::task-1",
        agent_id="researcher",
        input="tides?",
        status=TaskStatus.FAILED,
        reason=stored,
    )
    assert recovered(record).describe() == f"researcher failed: {spoken}"
