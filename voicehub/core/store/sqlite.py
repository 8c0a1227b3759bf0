"""A durable store on one SQLite file (stdlib `sqlite3`, WAL mode).

Methods are `async` because the `Store` protocol is, but each runs synchronously on the calling
thread: a single-row statement on a local WAL file costs microseconds, less than a hop to a worker
thread would.

Commits: outbox writes (deliveries) are committed before the method returns, because a result
must be durable before anything else happens to it (the `delivering` mark before an injection
is the one exception, see `update_delivery`). Other writes (events, rooms, tasks) are
group-committed once per event-loop turn: a crash can lose at most the last turn's events,
and a delegation costs one commit instead of six. Reads on the same connection see
uncommitted writes, so callers never notice.

Checkpoints: SQLite's automatic WAL checkpoint runs inside a commit and stalls the event loop
for 5-15 ms (fsync). It is turned off; instead a PASSIVE checkpoint runs on a worker thread
with its own connection every `CHECKPOINT_PAGES` pages, without blocking writers.

Indexed fields live in their own columns; the rest of a record is pydantic JSON, so adding a
field to a record model needs no migration.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pydantic_core

from voicehub.core.events import Event
from voicehub.core.store.base import (
    DeliveryRecord,
    DeliveryStatus,
    InstanceRecord,
    RoomRecord,
    RoomStatus,
    TaskRecord,
    TaskStatus,
)
from voicehub.errors import StoreError

SCHEMA_VERSION = 2
"""The schema this module writes, kept in the file's `user_version` pragma (2 added the
instances table; a version 1 file gets it when opened)."""

BUSY_TIMEOUT_SECONDS = 5.0
"""How long a statement waits for another connection's write lock before failing."""

CHECKPOINT_PAGES = 1000
"""Writes (roughly WAL pages) between two background checkpoints."""

# A commit costs about one write per dirty page; a delegation dirties ~27 small pages (rows are
# a few hundred bytes), so 2 KiB pages cut the bytes each commit writes with no deeper trees.
# New files only: an existing store keeps the page size it was created with.
PAGE_SIZE = 2048

_SCHEMA = """
CREATE TABLE rooms (
    id TEXT PRIMARY KEY,
    parent_id TEXT,
    status TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL,
    closed_at REAL
);
CREATE INDEX rooms_parent_id ON rooms (parent_id);
CREATE TABLE events (
    room_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (room_id, seq)
);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    parent_room_id TEXT NOT NULL,
    status TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX tasks_parent_room_id ON tasks (parent_room_id);
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    room_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX deliveries_room_id ON deliveries (room_id);
CREATE INDEX deliveries_status ON deliveries (status);
"""
_INSTANCES = """
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
"""

# Upserts use ON CONFLICT DO UPDATE rather than INSERT OR REPLACE: the row keeps its rowid, so
# `ORDER BY rowid` lists records in first-insertion order, as the memory store's dicts do.
_UPSERT_ROOM = """
INSERT INTO rooms (id, parent_id, status, metadata, created_at, closed_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET parent_id = excluded.parent_id, status = excluded.status,
    metadata = excluded.metadata, created_at = excluded.created_at,
    closed_at = excluded.closed_at
"""
_UPSERT_TASK = """
INSERT INTO tasks (id, parent_room_id, status, data) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET parent_room_id = excluded.parent_room_id,
    status = excluded.status, data = excluded.data
"""
_UPSERT_DELIVERY = """
INSERT INTO deliveries (id, room_id, status, created_at, data) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET room_id = excluded.room_id, status = excluded.status,
    created_at = excluded.created_at, data = excluded.data
"""
_ROOM_COLUMNS = "id, parent_id, status, metadata, created_at, closed_at"


class SQLiteStore:
    """The `Store` protocol on a SQLite file, created with its schema on first open.

    Raises `StoreError` (naming the file and what to do) when the file cannot be opened, is not
    a SQLite database, is corrupt, belongs to something else or was written by a newer voicehub,
    and when any method is called after `close()`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._connection: sqlite3.Connection | None = self._open()
        self._commit_scheduled = False
        self._writes_since_checkpoint = 0
        self._checkpointing = threading.Lock()

    def _open(self) -> sqlite3.Connection:
        try:
            # isolation_level=None: autocommit, so each write statement is its own transaction.
            # check_same_thread=False: the store may be built on one thread and used on the
            # event loop's; calls never overlap because they all run on that loop.
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot open SQLite store {self.path}: {exc}; "
                "check that its directory exists and is writable"
            ) from exc
        try:
            self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        try:
            # The first read of the header is where a non-database file fails.
            version = self._check_version(connection)
            if version == 0:  # a new file: takes effect before its first page is written
                connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA wal_autocheckpoint = 0")
            if version < SCHEMA_VERSION:
                self._create_schema(connection, version)
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def _check_version(self, connection: sqlite3.Connection) -> int:
        version: int = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer voicehub (schema version {version}; this "
                f"version reads {SCHEMA_VERSION}): upgrade voicehub or use another file"
            )
        if version < 0:
            raise StoreError(
                f"{self.path} has an unknown schema version {version}: it was not written by "
                "voicehub; use another file"
            )
        if version == 0 and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise StoreError(
                f"{self.path} is a SQLite database but not a voicehub store (it has tables and "
                "no voicehub schema version): use another file"
            )
        return version

    @staticmethod
    def _create_schema(connection: sqlite3.Connection, version: int) -> None:
        """Create the schema (version 0) or bring an older one up to date."""
        # One transaction, so a crash mid-way leaves an empty file, not half a schema.
        connection.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have upgraded the schema while we waited for the lock.
            if connection.execute("PRAGMA user_version").fetchone()[0] == version:
                for statement in ((_SCHEMA if version == 0 else "") + _INSTANCES).split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        connection = self._connection
        if connection is None:
            raise StoreError(
                f"SQLite store {self.path} is closed: create a new SQLiteStore to use it again"
            )
        try:
            return connection.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def _write(
        self, sql: str, params: Sequence[Any] = (), *, durable: bool = False
    ) -> sqlite3.Cursor:
        """Run a write inside the open transaction; commit now if `durable`, else at the end
        of this event-loop turn."""
        connection = self._connection
        if connection is not None and not connection.in_transaction:
            self._execute("BEGIN")
        cursor = self._execute(sql, params)
        self._writes_since_checkpoint += 1
        if durable:
            self._commit()
        elif not self._commit_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: plain synchronous use
                self._commit()
            else:
                # A zero-delay timer runs after the callbacks this turn made ready: the tasks
                # it woke (a delegation's workers) write into the same commit.
                loop.call_later(0, self._scheduled_commit)
                self._commit_scheduled = True
        return cursor

    def _scheduled_commit(self) -> None:
        self._commit_scheduled = False
        self._commit()

    def _commit(self) -> None:
        connection = self._connection
        if connection is None or not connection.in_transaction:
            return
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc
        if self._writes_since_checkpoint >= CHECKPOINT_PAGES:
            self._writes_since_checkpoint = 0
            self._start_checkpoint()

    def _start_checkpoint(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if not self._checkpointing.locked():
            loop.run_in_executor(None, self._checkpoint)

    def _checkpoint(self) -> None:
        """PASSIVE checkpoint on a worker thread with a connection of its own."""
        with self._checkpointing:
            try:
                with sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS) as connection:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                connection.close()
            except sqlite3.Error:  # the next checkpoint (or close) will catch up
                pass

    def _fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cursor = self._execute(sql, params)
        try:
            return cursor.fetchall()
        except sqlite3.Error as exc:  # a damaged page can surface mid-scan
            raise self._failure(exc) from exc

    def _fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = self._execute(sql, params)
        try:
            return cursor.fetchone()
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: sqlite3.Error) -> StoreError:
        if getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return StoreError(
                f"{self.path} is not a SQLite database or is corrupt ({exc}): move the file "
                "aside (or restore it from a backup) and open the store again to start afresh"
            )
        return StoreError(
            f"SQLite store {self.path} failed: {exc}; check that the file is writable and not "
            "locked by another process"
        )

    # Rooms

    async def create_room(self, room: RoomRecord) -> None:
        """Store a new room (an existing room with the same id is replaced)."""
        self._write(_UPSERT_ROOM, _room_row(room))

    async def get_room(self, room_id: str) -> RoomRecord | None:
        """The room with this id, or None."""
        row = self._fetch_one(f"SELECT {_ROOM_COLUMNS} FROM rooms WHERE id = ?", (room_id,))
        return _room_from_row(row) if row else None

    async def update_room(self, room: RoomRecord) -> None:
        """Replace the stored room with this one (inserting it if missing)."""
        self._write(_UPSERT_ROOM, _room_row(room))

    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]:
        """Rooms in creation order, optionally only children of `parent_id` or one status."""
        where, params = _conditions(("parent_id", parent_id), ("status", status))
        rows = self._fetch_all(f"SELECT {_ROOM_COLUMNS} FROM rooms{where} ORDER BY rowid", params)
        return [_room_from_row(row) for row in rows]

    # Events

    async def append_event(self, event: Event) -> None:
        """Store an event under its (room_id, seq); a seq already stored raises StoreError."""
        try:
            self._write(
                "INSERT INTO events (room_id, seq, id, kind, data) VALUES (?, ?, ?, ?, ?)",
                (event.room_id, event.seq, event.id, event.kind.value, event.model_dump_json()),
            )
        except StoreError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise StoreError(
                    f"SQLite store {self.path} already holds event seq {event.seq} of room "
                    f"{event.room_id!r}: each seq of a room is stored once"
                ) from exc.__cause__
            raise

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """Events of a room with seq > `after_seq`, oldest first, at most `limit` of them."""
        rows = self._fetch_all(
            "SELECT data FROM events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (room_id, after_seq, -1 if limit is None else limit),
        )
        return [Event.model_validate_json(data) for (data,) in rows]

    async def recent_events(self, room_id: str, limit: int) -> list[Event]:
        """The last `limit` events of a room, oldest first."""
        if limit <= 0:
            return []
        # Walk the (room_id, seq) primary key backwards: cost grows with limit, not history.
        rows = self._fetch_all(
            "SELECT data FROM events WHERE room_id = ? ORDER BY seq DESC LIMIT ?",
            (room_id, limit),
        )
        return [Event.model_validate_json(data) for (data,) in reversed(rows)]

    async def last_seq(self, room_id: str) -> int:
        """The highest seq stored for a room, 0 if it has no events."""
        row = self._fetch_one("SELECT max(seq) FROM events WHERE room_id = ?", (room_id,))
        return int(row[0]) if row[0] is not None else 0

    # Tasks

    async def save_task(self, task: TaskRecord) -> None:
        """Insert or replace a task by id."""
        self._write(
            _UPSERT_TASK, (task.id, task.parent_room_id, task.status.value, task.model_dump_json())
        )

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task with this id, or None."""
        row = self._fetch_one("SELECT data FROM tasks WHERE id = ?", (task_id,))
        return TaskRecord.model_validate_json(row[0]) if row else None

    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]:
        """Tasks in first-save order, optionally of one parent room and/or some statuses."""
        where, params = _conditions(("parent_room_id", parent_room_id), ("status", statuses))
        rows = self._fetch_all(f"SELECT data FROM tasks{where} ORDER BY rowid", params)
        return [TaskRecord.model_validate_json(data) for (data,) in rows]

    async def count_tasks(self, parent_room_id: str) -> int:
        """How many tasks a parent room has delegated."""
        row = self._fetch_one(
            "SELECT count(*) FROM tasks WHERE parent_room_id = ?", (parent_room_id,)
        )
        return int(row[0])

    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        """Replace the stored task if its fence is `expected_fence`; True if written.

        Committed at the end of this loop turn, like `save_task` (a delegation finishing two
        workers writes both with the outbox item in one commit). Until then this connection
        holds SQLite's write lock, so another process's swap waits and then sees the new
        fence; a crash before the commit leaves the task as it was, which recovery treats as
        lost work.
        """
        cursor = self._write(
            "UPDATE tasks SET parent_room_id = ?, status = ?, data = ? "
            "WHERE id = ? AND coalesce(json_extract(data, '$.fence'), 0) = ?",
            (
                task.parent_room_id,
                task.status.value,
                task.model_dump_json(),
                task.id,
                expected_fence,
            ),
        )
        return cursor.rowcount == 1

    # Instances

    async def beat_instance(self, instance: InstanceRecord) -> None:
        """Store an instance's heartbeat (committed now: other processes read it)."""
        self._write(
            "INSERT INTO instances (id, data) VALUES (?, ?) "
            "ON CONFLICT (id) DO UPDATE SET data = excluded.data",
            (instance.id, instance.model_dump_json()),
            durable=True,
        )

    async def list_instances(self) -> list[InstanceRecord]:
        """Every stored heartbeat, by instance id."""
        rows = self._fetch_all("SELECT data FROM instances ORDER BY id")
        return [InstanceRecord.model_validate_json(data) for (data,) in rows]

    async def remove_instance(self, instance_id: str) -> None:
        """Forget an instance's heartbeat."""
        self._write("DELETE FROM instances WHERE id = ?", (instance_id,), durable=True)

    # Deliveries

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        """Insert a delivery unless its id is stored already; True if it was inserted."""
        cursor = self._write(
            "INSERT OR IGNORE INTO deliveries (id, room_id, status, created_at, data) "
            "VALUES (?, ?, ?, ?, ?)",
            _delivery_row(delivery),
            durable=True,
        )
        return cursor.rowcount == 1

    async def update_delivery(self, delivery: DeliveryRecord) -> None:
        """Replace the stored delivery with this one (inserting it if missing).

        Committed now, except the `delivering` mark written just before an injection: it
        commits at the end of this loop turn (with the outcome, when the speech ends in the
        same turn). No audio of the injection can play before then, and a `delivering` row
        lost in a crash reads as the unfinished item it was: it is spoken again either way.
        """
        durable = delivery.status is not DeliveryStatus.DELIVERING
        self._write(_UPSERT_DELIVERY, _delivery_row(delivery), durable=durable)

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        """Replace the stored delivery if its fence is `expected_fence`; True if written.

        Committed now, except a claim or lease renewal (`delivering`): like `update_delivery`,
        it commits at the end of this loop turn, before any audio of the injection can play.
        Until then this connection holds SQLite's write lock, so another process's claim waits
        for it and then sees the new fence.
        """
        # The check sits in the UPDATE, so SQLite's write lock makes it atomic across processes.
        cursor = self._write(
            "UPDATE deliveries SET room_id = ?, status = ?, created_at = ?, data = ? "
            "WHERE id = ? AND json_extract(data, '$.fence') IS ?",
            (*_delivery_row(delivery)[1:], delivery.id, expected_fence),
            durable=delivery.status is not DeliveryStatus.DELIVERING,
        )
        return cursor.rowcount == 1

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        """The delivery with this id, or None."""
        row = self._fetch_one("SELECT data FROM deliveries WHERE id = ?", (delivery_id,))
        return DeliveryRecord.model_validate_json(row[0]) if row else None

    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]:
        """Deliveries ordered by (created_at, id), optionally of one room and/or statuses."""
        where, params = _conditions(("room_id", room_id), ("status", statuses))
        rows = self._fetch_all(
            f"SELECT data FROM deliveries{where} ORDER BY created_at, id", params
        )
        return [DeliveryRecord.model_validate_json(data) for (data,) in rows]

    async def close(self) -> None:
        """Close the file (checkpointing the WAL). Later calls raise StoreError."""
        self._commit()
        connection, self._connection = self._connection, None
        if connection is not None:
            with self._checkpointing:  # let a running checkpoint finish first
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                connection.close()


def _conditions(*filters: tuple[str, str | Sequence[str] | None]) -> tuple[str, list[Any]]:
    """A WHERE clause for the filters that are set: a value means `=`, a sequence means `IN`."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in filters:
        if value is None:
            continue
        if isinstance(value, str):  # also the str-valued status enums
            clauses.append(f"{column} = ?")
            params.append(value)
        else:
            clauses.append(f"{column} IN ({', '.join('?' * len(value))})")
            params.extend(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _room_row(room: RoomRecord) -> tuple[Any, ...]:
    metadata = pydantic_core.to_json(room.metadata).decode()  # pydantic's own JSON rules
    return (room.id, room.parent_id, room.status.value, metadata, room.created_at, room.closed_at)


def _room_from_row(row: Sequence[Any]) -> RoomRecord:
    room_id, parent_id, status, metadata, created_at, closed_at = row
    return RoomRecord(
        id=room_id,
        parent_id=parent_id,
        status=RoomStatus(status),
        metadata=json.loads(metadata),
        created_at=created_at,
        closed_at=closed_at,
    )


def _delivery_row(delivery: DeliveryRecord) -> tuple[Any, ...]:
    return (
        delivery.id,
        delivery.room_id,
        delivery.status.value,
        delivery.created_at,
        delivery.model_dump_json(),
    )
