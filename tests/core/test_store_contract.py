"""The `Store` contract, run against every implementation: the memory store, SQLite on a file,
Redis (a real redis-server started for the session) and a Sentinel-managed Redis primary with a
replica (one set for the module; each write waits for the replica, `wait_replicas=1`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.store.base import (
    AccessTokenRecord,
    CallRecord,
    CallState,
    DeliveryRecord,
    DeliveryStatus,
    InstanceRecord,
    RoomRecord,
    RoomStatus,
    Store,
    TaskRecord,
    TaskStatus,
)
from voicehub.core.store.memory import MemoryStore
from voicehub.core.store.redis import RedisStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.errors import StoreError
from voicehub_dev.fakes.redis_sentinel import SentinelSet, running_sentinel_set
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]  # the fixture, imported for pytest


@pytest.fixture(scope="module")
def sentinel_set() -> Iterator[SentinelSet]:
    with running_sentinel_set() as redis_set:
        yield redis_set


@pytest.fixture(params=["memory", "sqlite", "redis", "sentinel"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    implementation: Store
    if request.param == "memory":
        implementation = MemoryStore()
    elif request.param == "sqlite":
        implementation = SQLiteStore(tmp_path / "hub.db")
    elif request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        implementation = RedisStore(server.url, prefix=unique_prefix())
    else:
        redis_set: SentinelSet = request.getfixturevalue("sentinel_set")
        implementation = RedisStore(f"{redis_set.url}?wait_replicas=1", prefix=unique_prefix())
    yield implementation
    await implementation.close()


def event(room_id: str, seq: int, text: str = "", **metadata: object) -> Event:
    return Event(room_id=room_id, seq=seq, text=text or f"{room_id} #{seq}", metadata=metadata)


def task(task_id: str, parent: str = "main", status: TaskStatus = TaskStatus.QUEUED) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        parent_room_id=parent,
        child_room_id=f"{parent}/{task_id}",
        agent_id="researcher",
        input=f"look up {task_id}",
        status=status,
    )


def delivery(
    delivery_id: str,
    room_id: str = "main",
    created_at: float = 100.0,
    status: DeliveryStatus = DeliveryStatus.PENDING,
) -> DeliveryRecord:
    return DeliveryRecord(
        id=delivery_id,
        room_id=room_id,
        content=f"result {delivery_id}",
        created_at=created_at,
        status=status,
    )


# Rooms


async def test_a_created_room_reads_back_equal(store: Store) -> None:
    room = RoomRecord(id="main", metadata={"caller": "+15550100", "tags": ["vip"], "n": 1.5})
    await store.create_room(room)
    assert await store.get_room("main") == room


async def test_an_unknown_room_is_none(store: Store) -> None:
    assert await store.get_room("nowhere") is None


async def test_update_room_replaces_status_closed_at_and_metadata(store: Store) -> None:
    await store.create_room(RoomRecord(id="child", parent_id="main", created_at=10.0))
    closed = RoomRecord(
        id="child",
        parent_id="main",
        status=RoomStatus.CLOSED,
        metadata={"result": "done"},
        created_at=10.0,
        closed_at=20.0,
    )
    await store.update_room(closed)
    assert await store.get_room("child") == closed


async def test_list_rooms_filters_by_parent_and_status(store: Store) -> None:
    await store.create_room(RoomRecord(id="main"))
    await store.create_room(RoomRecord(id="a", parent_id="main"))
    await store.create_room(RoomRecord(id="b", parent_id="main", status=RoomStatus.CLOSED))
    await store.create_room(RoomRecord(id="c", parent_id="other"))

    assert [r.id for r in await store.list_rooms()] == ["main", "a", "b", "c"]
    assert [r.id for r in await store.list_rooms(parent_id="main")] == ["a", "b"]
    assert [r.id for r in await store.list_rooms(status=RoomStatus.CLOSED)] == ["b"]
    assert [r.id for r in await store.list_rooms(parent_id="main", status=RoomStatus.OPEN)] == ["a"]
    assert await store.list_rooms(parent_id="nobody") == []


async def test_stored_rooms_do_not_share_state_with_the_caller(store: Store) -> None:
    room = RoomRecord(id="main", metadata={"k": "v"})
    await store.create_room(room)
    room.metadata["k"] = "changed"
    fetched = await store.get_room("main")
    assert fetched is not None and fetched.metadata == {"k": "v"}


# Events


async def test_appended_events_list_in_seq_order_and_read_back_equal(store: Store) -> None:
    events = [
        Event(
            kind=EventKind.TOOL_RESULT,
            text="42",
            source="researcher",
            source_type=ChannelType.AGENT,
            role="tool",
            metadata={"call_id": "c1", "nested": {"a": [1, 2]}},
            room_id="main",
            seq=1,
        ),
        event("main", 2),
        event("main", 3),
    ]
    for e in events:
        await store.append_event(e)
    await store.append_event(event("other", 1))

    assert await store.list_events("main") == events
    assert await store.list_events("nowhere") == []


async def test_list_events_after_seq_and_limit(store: Store) -> None:
    for seq in range(1, 11):
        await store.append_event(event("main", seq))

    assert [e.seq for e in await store.list_events("main", after_seq=7)] == [8, 9, 10]
    assert [e.seq for e in await store.list_events("main", limit=3)] == [1, 2, 3]
    assert [e.seq for e in await store.list_events("main", after_seq=4, limit=2)] == [5, 6]
    assert await store.list_events("main", after_seq=10) == []
    assert await store.list_events("main", limit=0) == []


async def test_recent_events_are_the_last_n_oldest_first(store: Store) -> None:
    for seq in range(1, 11):
        await store.append_event(event("main", seq))
    await store.append_event(event("other", 1))

    assert [e.seq for e in await store.recent_events("main", 3)] == [8, 9, 10]
    assert [e.seq for e in await store.recent_events("main", 50)] == list(range(1, 11))
    assert await store.recent_events("main", 0) == []
    assert await store.recent_events("nowhere", 5) == []


async def test_last_seq_is_the_highest_appended_or_zero(store: Store) -> None:
    assert await store.last_seq("main") == 0
    for seq in (1, 2, 3):
        await store.append_event(event("main", seq))
    await store.append_event(event("other", 9))
    assert await store.last_seq("main") == 3
    assert await store.last_seq("other") == 9


async def test_the_same_event_appended_again_is_stored_once(store: Store) -> None:
    # A write that landed but whose answer was lost (a Redis restart) is retried as it was.
    first, second = event("main", 1, "hello"), event("main", 2)
    await store.append_event(first)
    await store.append_event(first)
    await store.append_event(second)
    await store.append_event(first)  # even after a later one
    assert await store.list_events("main") == [first, second]
    assert await store.last_seq("main") == 2


async def test_another_event_at_a_stored_seq_is_refused(store: Store) -> None:
    first = event("main", 1, "first")
    await store.append_event(first)
    with pytest.raises(StoreError, match="already holds another event at seq 1 of room 'main'"):
        await store.append_event(event("main", 1, "second"))
    assert await store.list_events("main") == [first]


async def test_events_list_in_seq_order_whatever_order_they_landed_in(store: Store) -> None:
    # A retried write of seq 2 may land after seq 3 of the same room.
    for seq in (1, 3, 2):
        await store.append_event(event("main", seq))
    assert [e.seq for e in await store.list_events("main")] == [1, 2, 3]
    assert [e.seq for e in await store.recent_events("main", 2)] == [2, 3]
    assert await store.last_seq("main") == 3


# Tasks


async def test_save_task_then_get_reads_back_equal(store: Store) -> None:
    saved = task("t1")
    await store.save_task(saved)
    assert await store.get_task("t1") == saved
    assert await store.get_task("missing") is None


async def test_save_task_upserts_by_id(store: Store) -> None:
    await store.save_task(task("t1"))
    finished = task("t1", status=TaskStatus.OK).model_copy(
        update={"output": "found it", "finished_at": 123.0, "metadata": {"tokens": 50}}
    )
    await store.save_task(finished)

    assert await store.get_task("t1") == finished
    assert await store.count_tasks("main") == 1
    assert await store.list_tasks() == [finished]


async def test_list_tasks_filters_by_parent_and_statuses(store: Store) -> None:
    await store.save_task(task("t1", status=TaskStatus.RUNNING))
    await store.save_task(task("t2", status=TaskStatus.OK))
    await store.save_task(task("t3", status=TaskStatus.QUEUED))
    await store.save_task(task("t4", parent="other", status=TaskStatus.RUNNING))
    # An update keeps the task's place in the listing.
    await store.save_task(task("t1", status=TaskStatus.FAILED))

    assert [t.id for t in await store.list_tasks()] == ["t1", "t2", "t3", "t4"]
    assert [t.id for t in await store.list_tasks(parent_room_id="main")] == ["t1", "t2", "t3"]
    unfinished = [TaskStatus.QUEUED, TaskStatus.RUNNING]
    assert [t.id for t in await store.list_tasks(statuses=unfinished)] == ["t3", "t4"]
    assert [t.id for t in await store.list_tasks(parent_room_id="main", statuses=unfinished)] == [
        "t3"
    ]
    assert await store.list_tasks(statuses=[]) == []


async def test_count_tasks_counts_per_parent_room(store: Store) -> None:
    assert await store.count_tasks("main") == 0
    for task_id in ("t1", "t2", "t3"):
        await store.save_task(task(task_id))
    await store.save_task(task("t4", parent="other"))
    assert await store.count_tasks("main") == 3
    assert await store.count_tasks("other") == 1


async def test_swap_task_writes_only_over_the_expected_fence(store: Store) -> None:
    await store.save_task(task("t1", status=TaskStatus.RUNNING).model_copy(update={"owner": "a"}))
    taken = task("t1", status=TaskStatus.FAILED).model_copy(update={"owner": "b", "fence": 1})
    rival = taken.model_copy(update={"owner": "c"})

    assert await store.swap_task(taken, expected_fence=0) is True
    assert await store.swap_task(rival, expected_fence=0) is False  # lost the race
    assert await store.get_task("t1") == taken
    assert await store.list_tasks(statuses=[TaskStatus.RUNNING]) == []
    assert [t.id for t in await store.list_tasks(statuses=[TaskStatus.FAILED])] == ["t1"]
    assert await store.swap_task(task("ghost"), expected_fence=0) is False
    assert await store.get_task("ghost") is None


async def test_swap_task_follows_a_plain_save(store: Store) -> None:
    await store.save_task(task("t1").model_copy(update={"fence": 3}))
    assert (
        await store.swap_task(task("t1").model_copy(update={"fence": 1}), expected_fence=0) is False
    )
    fresh = task("t1", status=TaskStatus.OK).model_copy(update={"fence": 4})
    assert await store.swap_task(fresh, expected_fence=3) is True
    assert await store.get_task("t1") == fresh


# Instances


def instance(instance_id: str, seen_at: float) -> InstanceRecord:
    return InstanceRecord(
        id=instance_id,
        started_at=100.0,
        seen_at=seen_at,
        expires_at=seen_at + 10,
        metadata={"pid": 42},
    )


async def test_instance_heartbeats_replace_the_last_one_and_can_be_removed(store: Store) -> None:
    assert await store.list_instances() == []
    await store.beat_instance(instance("b", 100.0))
    await store.beat_instance(instance("a", 100.0))
    await store.beat_instance(instance("b", 105.0))
    assert await store.list_instances() == [instance("a", 100.0), instance("b", 105.0)]

    await store.remove_instance("a")
    await store.remove_instance("never-seen")
    assert await store.list_instances() == [instance("b", 105.0)]


# Deliveries


async def test_put_delivery_is_idempotent_and_never_overwrites(store: Store) -> None:
    first = delivery("d1")
    assert await store.put_delivery(first) is True
    again = delivery("d1").model_copy(update={"content": "a different result"})
    assert await store.put_delivery(again) is False

    assert await store.get_delivery("d1") == first
    assert await store.list_deliveries() == [first]


async def test_update_delivery_replaces_the_record(store: Store) -> None:
    await store.put_delivery(delivery("d1"))
    delivered = delivery("d1", status=DeliveryStatus.DELIVERED).model_copy(
        update={"attempts": 1, "updated_at": 200.0, "metadata": {"spoken": True}}
    )
    await store.update_delivery(delivered)

    assert await store.get_delivery("d1") == delivered
    assert await store.get_delivery("missing") is None


async def test_list_deliveries_by_room_and_statuses_ordered_by_created_at_then_id(
    store: Store,
) -> None:
    await store.put_delivery(delivery("d3", created_at=30.0))
    await store.put_delivery(delivery("d2", created_at=10.0, status=DeliveryStatus.HELD))
    await store.put_delivery(delivery("d1", created_at=10.0))
    await store.put_delivery(delivery("d4", room_id="other", created_at=5.0))
    await store.put_delivery(delivery("d5", created_at=20.0, status=DeliveryStatus.DELIVERED))

    assert [d.id for d in await store.list_deliveries()] == ["d4", "d1", "d2", "d5", "d3"]
    assert [d.id for d in await store.list_deliveries(room_id="main")] == [
        "d1",
        "d2",
        "d5",
        "d3",
    ]
    waiting = [DeliveryStatus.PENDING, DeliveryStatus.HELD]
    assert [d.id for d in await store.list_deliveries(statuses=waiting)] == [
        "d4",
        "d1",
        "d2",
        "d3",
    ]
    assert [d.id for d in await store.list_deliveries(room_id="other", statuses=waiting)] == ["d4"]
    assert await store.list_deliveries(room_id="nowhere") == []
    assert await store.list_deliveries(statuses=[]) == []


async def test_list_deliveries_follows_status_updates(store: Store) -> None:
    await store.put_delivery(delivery("d1"))
    await store.update_delivery(delivery("d1", status=DeliveryStatus.DELIVERING))

    assert await store.list_deliveries(statuses=[DeliveryStatus.PENDING]) == []
    assert [d.id for d in await store.list_deliveries(statuses=[DeliveryStatus.DELIVERING])] == [
        "d1"
    ]


async def test_swap_delivery_writes_only_over_the_expected_fence(store: Store) -> None:
    await store.put_delivery(delivery("d1"))
    claimed = delivery("d1", status=DeliveryStatus.DELIVERING).model_copy(
        update={"fence": 1, "attempts": 1, "lease_owner": "a", "lease_until": 130.0}
    )
    rival = claimed.model_copy(update={"lease_owner": "b"})

    assert await store.swap_delivery(claimed, expected_fence=0) is True
    assert await store.swap_delivery(rival, expected_fence=0) is False  # lost the race
    assert await store.get_delivery("d1") == claimed
    assert [d.id for d in await store.list_deliveries(statuses=[DeliveryStatus.DELIVERING])] == [
        "d1"
    ]

    done = claimed.model_copy(update={"status": DeliveryStatus.DELIVERED, "fence": 2})
    assert await store.swap_delivery(done, expected_fence=1) is True
    assert await store.get_delivery("d1") == done
    assert await store.list_deliveries(statuses=[DeliveryStatus.DELIVERING]) == []


async def test_swap_delivery_of_a_missing_record_writes_nothing(store: Store) -> None:
    assert await store.swap_delivery(delivery("ghost"), expected_fence=0) is False
    assert await store.get_delivery("ghost") is None


async def test_swap_delivery_follows_a_plain_update(store: Store) -> None:
    await store.put_delivery(delivery("d1"))
    await store.update_delivery(delivery("d1").model_copy(update={"fence": 5}))
    stale = delivery("d1", status=DeliveryStatus.HELD).model_copy(update={"fence": 1})
    assert await store.swap_delivery(stale, expected_fence=0) is False
    fresh = delivery("d1", status=DeliveryStatus.HELD).model_copy(update={"fence": 6})
    assert await store.swap_delivery(fresh, expected_fence=5) is True


# Calls


def call(room_id: str, owner: str, fence: int, state: CallState = CallState.LIVE) -> CallRecord:
    desk, _, conversation = room_id.partition(":")
    return CallRecord(
        room_id=room_id,
        desk=desk,
        conversation=conversation,
        transport="twilio",
        state=state,
        owner=owner,
        fence=fence,
        started_at=100.0,
        updated_at=100.0 + fence,
        line={"call_sid": "CA1"},
        pending_question={"text": "Which city?"},
    )


async def test_a_call_record_is_written_once_per_fence_and_reads_back_equal(store: Store) -> None:
    assert await store.get_call("d:c") is None
    first = call("d:c", "a", 1)
    assert await store.swap_call(first, expected_fence=0) is True
    assert await store.swap_call(call("d:c", "b", 1), expected_fence=0) is False  # a lost race
    assert await store.get_call("d:c") == first
    taken = call("d:c", "b", 2)
    assert await store.swap_call(call("d:c", "c", 2), expected_fence=5) is False
    assert await store.swap_call(taken, expected_fence=1) is True
    assert await store.swap_call(call("d:c", "a", 2), expected_fence=1) is False  # a late write
    assert await store.get_call("d:c") == taken


async def test_list_calls_gives_the_open_calls_an_instance_serves(store: Store) -> None:
    await store.swap_call(call("d:2", "a", 1), expected_fence=0)
    await store.swap_call(call("d:1", "a", 1), expected_fence=0)
    await store.swap_call(call("d:3", "b", 1), expected_fence=0)
    assert [c.room_id for c in await store.list_calls(owner="a")] == ["d:1", "d:2"]
    await store.swap_call(call("d:2", "b", 2), expected_fence=1)  # taken over
    await store.swap_call(call("d:1", "a", 2, CallState.ENDED), expected_fence=1)  # hung up
    assert await store.list_calls(owner="a") == []
    assert [c.room_id for c in await store.list_calls(owner="b")] == ["d:2", "d:3"]
    handing = call("d:3", "b", 2, CallState.HANDING_OVER)
    await store.swap_call(handing, expected_fence=1)
    assert await store.list_calls(owner="b") == [call("d:2", "b", 2), handing]


async def test_a_stored_call_shares_no_state_with_the_caller(store: Store) -> None:
    record = call("d:c", "a", 1)
    await store.swap_call(record, expected_fence=0)
    record.line["call_sid"] = "changed"
    stored = await store.get_call("d:c")
    assert stored is not None and stored.line == {"call_sid": "CA1"}


# Deleting a conversation


async def fill_conversation(store: Store, room_id: str) -> None:
    """A conversation as a call leaves it: its room with transcripts and events, two
    workers' child rooms (one with a grandchild), their tasks and events, a delivered result,
    a held one with numbers sealed onto it, a follow-up sent, and its call record."""
    await store.create_room(RoomRecord(id=room_id, metadata={"desk": "research"}))
    for seq, kind in enumerate((EventKind.TRANSCRIPT, EventKind.MESSAGE, EventKind.DELIVERY), 1):
        await store.append_event(Event(room_id=room_id, seq=seq, kind=kind, text="my number"))
    for n in (1, 2):
        child = f"{room_id}::task-{n}"
        await store.create_room(RoomRecord(id=child, parent_id=room_id))
        await store.append_event(event(child, 1))
        worker = task(f"{room_id}-t{n}", parent=room_id, status=TaskStatus.OK)
        await store.save_task(worker.model_copy(update={"child_room_id": child}))
    grandchild = f"{room_id}::task-1::task-1"
    await store.create_room(RoomRecord(id=grandchild, parent_id=f"{room_id}::task-1"))
    await store.append_event(event(grandchild, 1))
    await store.save_task(task(f"{room_id}-t3", parent=f"{room_id}::task-1"))
    await store.put_delivery(delivery(f"{room_id}-d1", room_id, status=DeliveryStatus.DELIVERED))
    held = delivery(f"{room_id}-d2", room_id, status=DeliveryStatus.HELD)
    held.metadata = {"reach": "v1.sealed-numbers", "followup": {"channel": "sms", "sent": True}}
    await store.put_delivery(held)
    await store.put_delivery(delivery(f"{room_id}-d3", f"{room_id}::task-2"))
    await store.swap_call(call(room_id, "instance-a", 1), expected_fence=0)


async def test_delete_conversation_removes_it_and_everything_under_it(store: Store) -> None:
    await fill_conversation(store, "desk:gone")
    await fill_conversation(store, "desk:kept")
    before = await stored_text(store)

    erasure = await store.delete_conversation("desk:gone")

    assert sorted(erasure.room_ids) == [
        "desk:gone",
        "desk:gone::task-1",
        "desk:gone::task-1::task-1",
        "desk:gone::task-2",
    ]
    assert (erasure.events, erasure.tasks, erasure.deliveries, erasure.calls) == (6, 3, 3, 1)
    assert await store.get_room("desk:gone") is None
    assert await store.list_rooms(parent_id="desk:gone") == []
    assert await store.list_events("desk:gone") == []
    assert await store.last_seq("desk:gone::task-1") == 0
    assert await store.list_tasks(parent_room_id="desk:gone") == []
    assert await store.count_tasks("desk:gone") == 0
    assert await store.list_deliveries(room_id="desk:gone") == []
    assert await store.get_delivery("desk:gone-d2") is None
    assert await store.get_call("desk:gone") is None
    assert await store.list_calls(owner="instance-a") == [call("desk:kept", "instance-a", 1)]
    assert [r.id for r in await store.list_rooms()] == [
        "desk:kept",
        "desk:kept::task-1",
        "desk:kept::task-2",
        "desk:kept::task-1::task-1",
    ]
    # Nothing of it is left in any table or key; the other conversation is untouched.
    after = await stored_text(store)
    assert "gone" in before and "gone" not in after
    assert after.count("kept") == before.count("kept")
    assert len(await store.list_events("desk:kept")) == 3
    assert len(await store.list_deliveries()) == 3
    assert len(await store.list_tasks()) == 3


async def test_deleting_an_unknown_conversation_deletes_nothing(store: Store) -> None:
    await fill_conversation(store, "desk:kept")
    before = await stored_text(store)
    erasure = await store.delete_conversation("desk:nowhere")
    assert not erasure.found
    assert await stored_text(store) == before


async def test_a_deleted_conversation_can_start_afresh(store: Store) -> None:
    await fill_conversation(store, "desk:again")
    await store.delete_conversation("desk:again")
    await fill_conversation(store, "desk:again")  # seq 1 and fence 0 are free again
    assert len(await store.list_events("desk:again")) == 3
    assert (await store.get_call("desk:again")) == call("desk:again", "instance-a", 1)


async def stored_text(store: Store) -> str:
    """Everything the store holds, as text: every key and value (Redis), every row of every
    table (SQLite), every record (memory); a deleted conversation's id must appear nowhere."""
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as connection:
            tables = [
                name
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
                )
            ]
            return "\n".join(
                f"{table} {row!r}"
                for table in tables
                for row in connection.execute(f"SELECT * FROM {table} ORDER BY rowid")
            )
    if isinstance(store, RedisStore):
        return "\n".join(
            [f"{key} {await redis_value(store, key)}" for key in await redis_keys(store)]
        )
    assert isinstance(store, MemoryStore)
    return repr(sorted(vars(store).items()))


async def redis_keys(store: RedisStore) -> list[str]:
    return sorted([key async for key in store.redis.scan_iter(match=f"{store.prefix}:*")])


async def redis_value(store: RedisStore, key: str) -> str:
    redis = store.redis
    kind = await redis.type(key)
    if kind == "hash":
        return repr(sorted((await redis.hgetall(key)).items()))
    if kind == "zset":
        return repr(await redis.zrange(key, 0, -1, withscores=True))
    if kind == "set":
        return repr(sorted(await redis.smembers(key)))
    return repr(await redis.get(key))


# Access tokens


async def test_access_tokens_are_saved_replaced_listed_by_id_and_revoked(store: Store) -> None:
    second = AccessTokenRecord(id="b", name="ops", scopes=["read"], digest="d2", created_at=1.0)
    first = AccessTokenRecord(id="a", scopes=["desk:research"], digest="d1", expires_at=9.0)
    await store.save_token(second)
    await store.save_token(first)
    assert await store.list_tokens() == [first, second]
    rotated = second.model_copy(
        update={"digest": "d3", "previous_digest": "d2", "previous_until": 5.0}
    )
    await store.save_token(rotated)
    assert await store.list_tokens() == [first, rotated]
    assert await store.delete_token("a") is True
    assert await store.delete_token("a") is False
    assert await store.list_tokens() == [rotated]
