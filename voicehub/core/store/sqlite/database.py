"""The SQLite store's connection: statements, the commit schedule and checkpoints.

Statements run synchronously on the calling thread: a single-row statement on a local WAL
file costs microseconds, less than a hop to a worker thread would.

Commits: a write made `durable` (outbox writes, heartbeats) is committed before the call
returns, with every write before it. Other writes (events, rooms, tasks, a delivery claim)
are group-committed by a timer set at the first of them, `group_commit_seconds` later (0 by
default): the event loop runs it once the callbacks the writing turn made ready have run and
that time has passed. So the workers a delegation step wakes write into the step's commit
(a commit writes every dirty page to the WAL, two system calls a page). A crash can lose
the writes of that window, never an outbox write. Reads on
the same connection see uncommitted writes, so callers never notice; another process sees
them once committed.

A longer window would share a commit among the delegations of that window under load, but
another connection's write waits for the lock meanwhile, blocking its event loop inside
SQLite's busy handler (a second store on the same file in the same process waits for the
full busy timeout, as the timer cannot run): hence 0 by default.

Checkpoints: SQLite's automatic WAL checkpoint runs inside a commit and stalls the event loop
while it syncs the file. It is turned off; instead a PASSIVE checkpoint runs on a worker thread
with its own connection every `CHECKPOINT_PAGES` pages, without blocking writers.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicehub.core.store.sqlite.schema import BUSY_TIMEOUT_SECONDS, failure, open_file
from voicehub.errors import StoreError, StoreUnavailableError

CHECKPOINT_PAGES = 1000
"""Writes (roughly WAL pages) between two background checkpoints."""

GROUP_COMMIT_SECONDS = 0.0
"""How long a group commit waits after the first write it carries (0: only until the tasks
the writing turn woke have run)."""


class Database:
    """One connection to a store file and its commit schedule."""

    def __init__(self, path: Path, group_commit_seconds: float = GROUP_COMMIT_SECONDS) -> None:
        self.path = path
        self.group_commit_seconds = group_commit_seconds
        self._connection: sqlite3.Connection | None = open_file(path)
        self._commit_scheduled = False
        self._writes_since_checkpoint = 0
        self._checkpointing = threading.Lock()
        self.statements = 0  # run since opening, commits included (benchmarks count them)
        self.commits = 0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        connection = self._connection
        if connection is None:
            raise StoreError(
                f"SQLite store {self.path} is closed: create a new SQLiteStore to use it again"
            )
        self.statements += 1
        try:
            return connection.execute(sql, params)
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from exc

    def write(self, sql: str, params: Sequence[Any] = (), *, durable: bool = False) -> int:
        """Run a write inside the open transaction; commit now if `durable`, else with the
        group commit. Returns how many rows it changed."""
        connection = self._connection
        began = connection is not None and not connection.in_transaction
        if began:
            self.execute("BEGIN")
        try:
            changed = self.execute(sql, params).rowcount
        except StoreUnavailableError:
            # Locked out: end the transaction, or the reads made on this connection before
            # the retry would pin a snapshot older than the other writer's commit, and every
            # retry would then fail (SQLITE_BUSY_SNAPSHOT). Locked out means this connection
            # holds no uncommitted write, so nothing is lost.
            if began:
                self._rollback()
            raise
        self._writes_since_checkpoint += 1
        if durable:
            self.commit()
        elif not self._commit_scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: plain synchronous use
                self.commit()
            else:
                # A timer runs after the callbacks this turn made ready, even at 0 s: the
                # tasks it woke (a delegation's workers) write into the same commit.
                loop.call_later(self.group_commit_seconds, self._scheduled_commit)
                self._commit_scheduled = True
        return changed

    def _scheduled_commit(self) -> None:
        self._commit_scheduled = False
        self.commit()

    def _rollback(self) -> None:
        connection = self._connection
        if connection is not None and connection.in_transaction:
            try:
                connection.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise failure(self.path, exc) from exc

    def commit(self) -> None:
        """Commit the open transaction, if any."""
        connection = self._connection
        if connection is None or not connection.in_transaction:
            return
        self.statements += 1
        self.commits += 1
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from exc
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

    def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cursor = self.execute(sql, params)
        try:
            return cursor.fetchall()
        except sqlite3.Error as exc:  # a damaged page can surface mid-scan
            raise failure(self.path, exc) from exc

    def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = self.execute(sql, params)
        try:
            return cursor.fetchone()
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from exc

    def close(self) -> None:
        """Commit, checkpoint the WAL into the file and close. Later calls raise."""
        self.commit()
        connection, self._connection = self._connection, None
        if connection is not None:
            with self._checkpointing:  # let a running checkpoint finish first
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                connection.close()


def conditions(*filters: tuple[str, str | Sequence[str] | None]) -> tuple[str, list[Any]]:
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
