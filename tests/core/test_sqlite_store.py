"""What only the SQLite store promises: durability, WAL, and clear errors about bad files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import pytest

from voicehub.core.clock import settle
from voicehub.core.events import Event
from voicehub.core.store.base import (
    AccessTokenRecord,
    CallRecord,
    DeliveryRecord,
    DeliveryStatus,
    InstanceRecord,
    RoomRecord,
    RoomStatus,
    TaskRecord,
    TaskStatus,
)
from voicehub.core.store.sqlite import SCHEMA_VERSION, SQLiteStore, schema
from voicehub.core.store.sqlite.database import Database
from voicehub.errors import StoreError, StoreUnavailableError


async def test_everything_survives_closing_and_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    room = RoomRecord(id="main", metadata={"caller": "+15550100", "nested": {"a": [1, 2]}})
    child = RoomRecord(
        id="child", parent_id="main", status=RoomStatus.CLOSED, created_at=1.0, closed_at=2.0
    )
    events = [Event(room_id="main", seq=seq, text=f"turn {seq}") for seq in range(1, 6)]
    task = TaskRecord(
        id="t1",
        parent_room_id="main",
        child_room_id="child",
        agent_id="researcher",
        input="find it",
        status=TaskStatus.OK,
        output="found",
    )
    delivery = DeliveryRecord(
        id="d1", room_id="main", content="found", status=DeliveryStatus.HELD, attempts=2
    )

    store = SQLiteStore(path)
    await store.create_room(room)
    await store.create_room(child)
    for e in events:
        await store.append_event(e)
    await store.save_task(task)
    await store.put_delivery(delivery)
    await store.close()

    reopened = SQLiteStore(str(path))  # a str path works as well as a Path
    try:
        assert await reopened.get_room("main") == room
        assert await reopened.list_rooms(parent_id="main") == [child]
        assert await reopened.list_events("main") == events
        assert await reopened.last_seq("main") == 5
        assert await reopened.get_task("t1") == task
        assert await reopened.get_delivery("d1") == delivery
        assert await reopened.put_delivery(delivery) is False  # still idempotent after reopen
    finally:
        await reopened.close()


async def test_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)
    await store.append_event(Event(room_id="main", seq=1))

    # journal_mode=WAL is persistent, so a separate connection sees it.
    other = sqlite3.connect(path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert other.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        other.close()
        await store.close()


@pytest.mark.parametrize(
    "content",
    [os.urandom(16384), b"rooms:\n  - main\n" * 100],
    ids=["random-bytes", "text-file"],
)
async def test_a_file_that_is_not_a_database_raises_store_error_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "not-a-db.db"
    path.write_bytes(content)

    with pytest.raises(StoreError, match="not a SQLite database or is corrupt") as raised:
        SQLiteStore(path)
    assert str(path) in str(raised.value)
    assert path.read_bytes() == content  # the file is left as it was


async def test_a_corrupt_database_raises_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)
    for seq in range(1, 500):
        await store.append_event(Event(room_id="main", seq=seq, text="x" * 200))
    await store.close()
    data = bytearray(path.read_bytes())
    page = 4096  # keep the header page, scramble every page after it
    data[page:] = bytes((b * 7 + 13) % 256 for b in range(len(data) - page))
    path.write_bytes(bytes(data))

    with pytest.raises(StoreError) as raised:
        reopened = SQLiteStore(path)
        try:
            await reopened.recent_events("main", 5)
        finally:
            await reopened.close()
    assert str(path) in str(raised.value)


async def test_a_version_1_file_gets_the_instances_calls_and_tokens_tables_and_keeps_its_data(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    await SQLiteStore(path).close()
    old = sqlite3.connect(path)  # as version 1 wrote it: no instances, tasks without fences
    old.execute("DROP TABLE instances")
    old.execute("DROP TABLE calls")
    old.execute("DROP TABLE tokens")
    old.execute("INSERT INTO tasks VALUES ('t1', 'main', 'running', ?)", (_OLD_TASK,))
    old.execute("PRAGMA user_version = 1")
    old.commit()
    old.close()

    store = SQLiteStore(path)
    try:
        stored = await store.get_task("t1")
        assert stored is not None and (stored.owner, stored.fence) == ("", 0)
        taken = stored.model_copy(update={"owner": "b", "fence": 1})
        assert await store.swap_task(taken, expected_fence=0) is True
        await store.beat_instance(InstanceRecord(id="b", started_at=1, seen_at=2, expires_at=3))
        assert [i.id for i in await store.list_instances()] == ["b"]
        call = CallRecord(room_id="d:c", desk="d", conversation="c", transport="twilio", fence=1)
        assert await store.swap_call(call, expected_fence=0) is True
        assert await store.get_call("d:c") == call
        await store.save_token(AccessTokenRecord(id="k", digest="d"))
        assert [t.id for t in await store.list_tokens()] == ["k"]
    finally:
        await store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    check.close()


_OLD_TASK = (
    '{"id": "t1", "parent_room_id": "main", "child_room_id": "main::t1", "agent_id": "a", '
    '"input": "x", "status": "running", "output": "", "reason": "", "metadata": {}, '
    '"created_at": 1.0, "finished_at": null}'
)


async def test_a_file_from_a_newer_schema_version_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    future = sqlite3.connect(path)
    future.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    future.close()

    with pytest.raises(StoreError, match="newer voicehub") as raised:
        SQLiteStore(path)
    assert str(path) in str(raised.value)


async def test_a_foreign_sqlite_database_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "other-app.db"
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE contacts (name TEXT)")
    foreign.commit()
    foreign.close()

    with pytest.raises(StoreError, match="not a voicehub store") as raised:
        SQLiteStore(path)
    assert str(path) in str(raised.value)


async def test_a_missing_directory_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "hub.db"
    with pytest.raises(StoreError, match="directory exists") as raised:
        SQLiteStore(path)
    assert str(path) in str(raised.value)


async def test_using_a_closed_store_raises_store_error(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)
    await store.close()
    await store.close()  # closing twice is harmless

    with pytest.raises(StoreError, match="closed") as raised:
        await store.get_room("main")
    assert str(path) in str(raised.value)
    with pytest.raises(StoreError, match="closed"):
        await store.append_event(Event(room_id="main", seq=1))


async def test_a_file_locked_by_another_process_is_unavailable_until_it_lets_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "BUSY_TIMEOUT_SECONDS", 0.01)  # do not wait 5 s for the lock
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing: holds the write lock
    event = Event(room_id="main", seq=1, text="first")
    with pytest.raises(StoreUnavailableError, match="locked"):
        await store.append_event(event)
    assert await store.list_events("main") == []  # a read meanwhile, on the store's connection
    # The other one writes and lets go: the refused write must not have left a transaction
    # whose snapshot predates that commit (every retry would fail, SQLITE_BUSY_SNAPSHOT).
    other.execute("INSERT INTO tokens (id, data) VALUES ('t', '{}')")
    other.execute("COMMIT")
    other.close()
    await store.append_event(event)  # the same write again, once the lock is free
    assert await store.list_events("main") == [event]
    await store.close()


async def test_appending_a_seq_twice_raises_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "hub.db")
    await store.append_event(Event(room_id="main", seq=1, text="first"))

    with pytest.raises(StoreError, match="seq 1 of room 'main'"):
        await store.append_event(Event(room_id="main", seq=1, text="second"))
    assert [e.text for e in await store.list_events("main")] == ["first"]
    await store.close()


async def test_recent_events_on_a_long_history_returns_the_last_n_in_order(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "hub.db")
    for seq in range(1, 10_001):
        await store.append_event(Event(room_id="main", seq=seq, text=f"turn {seq}"))
        if seq % 1000 == 0:  # another room's history interleaved, which must not leak in
            await store.append_event(Event(room_id="other", seq=seq // 1000))

    recent = await store.recent_events("main", 20)
    assert [e.seq for e in recent] == list(range(9_981, 10_001))
    assert [e.text for e in recent][-1] == "turn 10000"
    assert await store.last_seq("main") == 10_000
    await store.close()


def _status_on_disk(path: Path, delivery_id: str) -> str:
    """What another process reading the file sees now."""
    with sqlite3.connect(path) as reader:
        row = reader.execute("SELECT status FROM deliveries WHERE id = ?", (delivery_id,))
        status: str = row.fetchone()[0]
    reader.close()
    return status


async def test_a_claim_commits_after_the_tasks_its_turn_woke_and_an_outcome_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path, group_commit_seconds=0)
    try:
        item = DeliveryRecord(id="d1", room_id="main", content="the result")
        assert await store.put_delivery(item)
        assert _status_on_disk(path, "d1") == "pending"  # the outbox write is durable at once
        claimed = item.model_copy(update={"status": DeliveryStatus.DELIVERING, "fence": 1})
        assert await store.swap_delivery(claimed, expected_fence=0)
        # Not yet on disk: a crash now leaves the item pending, and no audio has played.
        assert _status_on_disk(path, "d1") == "pending"
        await asyncio.sleep(0)  # the next turn runs what this one woke, then commits
        assert _status_on_disk(path, "d1") == "pending"
        await asyncio.sleep(0)
        assert _status_on_disk(path, "d1") == "delivering"
        done = claimed.model_copy(update={"status": DeliveryStatus.DELIVERED, "fence": 2})
        assert await store.swap_delivery(done, expected_fence=1)
        assert _status_on_disk(path, "d1") == "delivered"
    finally:
        await store.close()


async def test_a_new_file_gets_small_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    fresh = SQLiteStore(tmp_path / "fresh.db")
    await fresh.close()
    old_path = tmp_path / "old.db"
    with sqlite3.connect(old_path) as old:
        old.execute("PRAGMA page_size = 4096")
        old.execute("VACUUM")
    old.close()
    reopened = SQLiteStore(old_path)  # an empty 4 KiB-page file, as older versions made
    await reopened.close()
    for path, size in ((tmp_path / "fresh.db", 2048), (old_path, 4096)):
        with sqlite3.connect(path) as reader:
            assert reader.execute("PRAGMA page_size").fetchone()[0] == size
        reader.close()


def _events_on_disk(path: Path) -> int:
    """How many events another process reading the file sees now."""
    with sqlite3.connect(path) as reader:
        count: int = reader.execute("SELECT count(*) FROM events").fetchone()[0]
    reader.close()
    return count


async def test_the_writes_of_the_tasks_a_turn_wakes_share_its_commit(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path, group_commit_seconds=0)
    seen_by_worker: list[int] = []

    async def worker() -> None:  # as a delegation's worker, woken by the turn that wrote
        await store.append_event(Event(room_id="child", seq=1, text="the answer"))
        seen_by_worker.append(_events_on_disk(path))

    try:
        commits = store.commits
        await store.append_event(Event(room_id="main", seq=1, text="delegate this"))
        await asyncio.create_task(worker())
        # The dispatching turn's write was not committed alone before the worker ran...
        assert seen_by_worker == [0]
        await asyncio.sleep(0)
        # ...both are on disk after one commit.
        assert _events_on_disk(path) == 2
        assert store.commits == commits + 1
    finally:
        await store.close()


async def test_outbox_writes_commit_before_they_return_with_what_came_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)
    try:
        await store.append_event(Event(room_id="main", seq=1, text="a worker's answer"))
        assert await store.put_delivery(DeliveryRecord(id="d1", room_id="main", content="x"))
        assert _status_on_disk(path, "d1") == "pending"
        assert _events_on_disk(path) == 1
    finally:
        await store.close()


async def test_a_group_commit_comes_without_a_later_write(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path)  # the default window
    try:
        await store.append_event(Event(room_id="main", seq=1, text="the last words"))
        commits = store.commits
        # Nothing else happens: the timer alone commits (waits on the commit, not a time).
        for _ in range(100_000):
            if store.commits > commits:
                break
            await asyncio.sleep(0)
        assert _events_on_disk(path) == 1
    finally:
        await store.close()


async def test_a_longer_group_commit_window_carries_the_writes_of_later_turns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "hub.db"
    store = SQLiteStore(path, group_commit_seconds=60.0)
    try:
        commits = store.commits
        for seq in (1, 2, 3):  # three turns inside the window
            await store.append_event(Event(room_id="main", seq=seq))
            await asyncio.sleep(0)
        assert store.commits == commits and _events_on_disk(path) == 0
        # An outbox write does not wait: it commits at once, with everything before it.
        assert await store.put_delivery(DeliveryRecord(id="d1", room_id="main", content="x"))
        assert store.commits == commits + 1 and _events_on_disk(path) == 3
    finally:
        await store.close()


# -- a full disk ---------------------------------------------------------------------------


def _full_after(database: Database, pages: int) -> None:
    """SQLite's own limit: past `pages` more pages, writes fail with SQLITE_FULL."""
    count = database.fetch_one("PRAGMA page_count")[0]
    database.execute(f"PRAGMA max_page_count = {count + pages}")


def _committed(path: Path) -> set[str]:
    with sqlite3.connect(path) as other:  # another connection sees committed rows only
        return {row[0] for row in other.execute("SELECT id FROM tokens")}


async def test_writes_a_full_disk_rolled_back_are_kept_and_committed_once_there_is_room(
    tmp_path: Path,
) -> None:
    path = tmp_path / "voicehub.db"
    database = Database(path)
    try:
        database.write("INSERT INTO tokens VALUES ('before', '{}')")  # group-committed
        await settle()  # the group commit's timer runs
        assert _committed(path) == {"before"}
        _full_after(database, 2)
        database.write("INSERT INTO tokens VALUES ('kept', '{}')")  # told it is written
        with pytest.raises(StoreUnavailableError, match="disk is full"):
            database.write("INSERT INTO tokens VALUES ('big', ?)", ("x" * 200_000,))
        # SQLite rolled the whole transaction back, 'kept' with it: it is written again
        # (at the next commit, or the group commit tried again), not lost
        assert _committed(path) == {"before"}
        _full_after(database, 1000)
        database.commit()
        assert _committed(path) == {"before", "kept"}
        database.write("INSERT INTO tokens VALUES ('after', '{}')")
        database.commit()
        assert _committed(path) == {"before", "kept", "after"}  # 'kept' once, no error
    finally:
        database.close()


async def test_a_durable_write_a_full_disk_refused_is_reported_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "voicehub.db"
    database = Database(path)
    try:
        _full_after(database, 0)
        with pytest.raises(StoreUnavailableError, match="disk is full"):
            database.write("INSERT INTO tokens VALUES ('big', ?)", ("x" * 200_000,), durable=True)
        _full_after(database, 1000)
        database.commit()
        assert _committed(path) == set()  # its caller was told: it retries, or gives up
    finally:
        database.close()
