"""The SQLite store's file: its schema, its version, and opening (and upgrading) it.

Indexed fields live in their own columns; the rest of a record is pydantic JSON, so adding a
field to a record model needs no migration.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from voicehub.errors import StoreError, StoreUnavailableError

SCHEMA_VERSION = 4
"""The schema this module writes, kept in the file's `user_version` pragma (2 added the
instances table, 3 the calls table, 4 the access tokens table; an older file gets them
when opened)."""

BUSY_TIMEOUT_SECONDS = 5.0
"""How long a statement waits for another connection's write lock before failing."""

# A commit costs about one write per dirty page; a delegation dirties a few dozen small pages
# (rows are a few hundred bytes), so 2 KiB pages cut the bytes each commit writes with no
# deeper trees.
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
_CALLS = """
CREATE TABLE IF NOT EXISTS calls (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    open INTEGER NOT NULL,
    fence INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_owner ON calls (owner, open);
"""
_TOKENS = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
"""


def open_file(path: Path) -> sqlite3.Connection:
    """A connection to the store at `path`, its schema created or brought up to date.

    Raises `StoreError` naming the file when it cannot be opened, is not a SQLite database,
    is corrupt, belongs to something else or was written by a newer voicehub.
    """
    try:
        # isolation_level=None: autocommit, so each write statement is its own transaction
        # unless the store opened one. check_same_thread=False: the store may be built on one
        # thread and used on the event loop's; calls never overlap because they all run on
        # that loop.
        connection = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise StoreError(
            f"cannot open SQLite store {path}: {exc}; "
            "check that its directory exists and is writable"
        ) from exc
    try:
        _prepare(connection, path)
    except BaseException:
        connection.close()
        raise
    return connection


def failure(path: Path, exc: sqlite3.Error) -> StoreError:
    """The `StoreError` for a failed statement on the file at `path`: a
    `StoreUnavailableError` when another connection holds the lock past the busy timeout
    (it will let go) or the disk is full (space may be freed)."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return StoreError(
            f"{path} is not a SQLite database or is corrupt ({exc}): move the file "
            "aside (or restore it from a backup) and open the store again to start afresh"
        )
    if name.startswith("SQLITE_FULL"):
        return StoreUnavailableError(
            f"SQLite store {path}: the disk is full ({exc}): free space on it; writes are "
            "kept and tried again meanwhile"
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreUnavailableError(
            f"SQLite store {path} is locked by another connection ({exc}): check what else "
            "holds the file open"
        )
    return StoreError(
        f"SQLite store {path} failed: {exc}; check that the file is writable and not "
        "locked by another process"
    )


def _prepare(connection: sqlite3.Connection, path: Path) -> None:
    try:
        # The first read of the header is where a non-database file fails.
        version = _check_version(connection, path)
        if version == 0:  # a new file: takes effect before its first page is written
            connection.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        # The automatic checkpoint runs inside a commit and stalls the loop while it syncs:
        # the store checkpoints on a worker thread instead (`Database`).
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        if version < SCHEMA_VERSION:
            _create_schema(connection, version)
    except sqlite3.Error as exc:
        raise failure(path, exc) from exc


def _check_version(connection: sqlite3.Connection, path: Path) -> int:
    version: int = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer voicehub (schema version {version}; this "
            f"version reads {SCHEMA_VERSION}): upgrade voicehub or use another file"
        )
    if version < 0:
        raise StoreError(
            f"{path} has an unknown schema version {version}: it was not written by "
            "voicehub; use another file"
        )
    if version == 0 and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise StoreError(
            f"{path} is a SQLite database but not a voicehub store (it has tables and "
            "no voicehub schema version): use another file"
        )
    return version


def _create_schema(connection: sqlite3.Connection, version: int) -> None:
    """Create the schema (version 0) or bring an older one up to date."""
    # One transaction, so a crash mid-way leaves an empty file, not half a schema.
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have upgraded the schema while we waited for the lock.
        if connection.execute("PRAGMA user_version").fetchone()[0] == version:
            for statement in (
                (_SCHEMA if version == 0 else "") + _INSTANCES + _CALLS + _TOKENS
            ).split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
