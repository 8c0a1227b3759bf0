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

A full disk (SQLITE_FULL) rolls back the whole open transaction, group-committed writes
whose callers were told they were done included. So the writes of the open transaction are
kept until it commits: after a rollback they are written again at the start of the next
transaction, and a group commit that fails is tried again every `COMMIT_RETRY_SECONDS`
until it lands (a disk filled by something else gets room again). A `durable` write whose
commit failed is not kept: its caller is told, and retries it.

Checkpoints: SQLite's automatic WAL checkpoint runs inside a commit and stalls the event loop
while it syncs the file. It is turned off; instead a PASSIVE checkpoint runs on a worker thread
with its own connection every `CHECKPOINT_PAGES` pages, without blocking writers.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voicehub.core.store.sqlite.schema import BUSY_TIMEOUT_SECONDS, failure, open_file
from voicehub.errors import StoreError, StoreUnavailableError

log = logging.getLogger("voicehub.store")

COMMIT_RETRY_SECONDS = 0.5
"""How soon a group commit that failed (a full disk) is tried again."""

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
        self._commit_failing = False
        # the open transaction's writes, written again if a failure rolls it back
        self._uncommitted: list[tuple[str, Sequence[Any]]] = []
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
        try:
            if began:
                self._begin()
            changed = self.execute(sql, params).rowcount
        except StoreUnavailableError:
            # Locked out (or the disk full): end the transaction, or the reads made on this
            # connection before the retry would pin a snapshot older than the other
            # writer's commit, and every retry would then fail (SQLITE_BUSY_SNAPSHOT). The
            # writes it held are kept, and written again in the next one.
            if began:
                self._rollback()
            self._schedule_commit(COMMIT_RETRY_SECONDS)
            raise
        self._uncommitted.append((sql, params))
        self._writes_since_checkpoint += 1
        if durable:
            try:
                self.commit()
            except StoreError:
                self._uncommitted.remove((sql, params))  # its caller is told, and retries
                self._schedule_commit(COMMIT_RETRY_SECONDS)
                raise
        else:
            self._schedule_commit(self.group_commit_seconds)
        return changed

    def _begin(self) -> None:
        """Open a transaction, with the writes a failure rolled back written again first."""
        self.execute("BEGIN")
        for sql, params in self._uncommitted:
            self.execute(sql, params)

    def _schedule_commit(self, delay: float) -> None:
        if self._commit_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: plain synchronous use
            self.commit()
            return
        # A timer runs after the callbacks this turn made ready, even at 0 s: the tasks it
        # woke (a delegation's workers) write into the same commit.
        loop.call_later(delay, self._scheduled_commit)
        self._commit_scheduled = True

    def _scheduled_commit(self) -> None:
        self._commit_scheduled = False
        try:
            self.commit()
        except StoreError as exc:
            if not self._commit_failing:
                log.warning(
                    "SQLite store %s: a commit failed (%s); its %d writes are kept and "
                    "committed again every %g s",
                    self.path, exc, len(self._uncommitted), COMMIT_RETRY_SECONDS,
                )  # fmt: skip
            self._commit_failing = True
            self._schedule_commit(COMMIT_RETRY_SECONDS)
            return
        if self._commit_failing:
            log.info("SQLite store %s: the kept writes are committed", self.path)
            self._commit_failing = False

    def _rollback(self) -> None:
        connection = self._connection
        if connection is not None and connection.in_transaction:
            try:
                connection.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise failure(self.path, exc) from exc

    def commit(self) -> None:
        """Commit the open transaction (or the writes a failure rolled back), if any."""
        connection = self._connection
        if connection is None:
            return
        if not connection.in_transaction:
            if not self._uncommitted:
                return
            try:
                self._begin()
            except StoreError:
                if connection.in_transaction:
                    self._rollback()
                raise
        self.statements += 1
        self.commits += 1
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            if connection.in_transaction:  # not rolled back: end it, keep its writes
                self._rollback()
            raise failure(self.path, exc) from exc
        self._uncommitted.clear()
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
