"""The events table: each room's events under (room_id, seq), as pydantic JSON."""

from __future__ import annotations

import sqlite3

from voicehub.core.events import Event
from voicehub.core.store.sqlite.database import Database
from voicehub.errors import StoreError

_INSERT = "INSERT INTO events (room_id, seq, id, kind, data) VALUES (?, ?, ?, ?, ?)"


class EventTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def append(self, event: Event) -> None:
        """Store an event under its (room_id, seq). The same event again (by id: a retried
        write) is already stored; another event at a stored seq raises StoreError."""
        try:
            self.database.write(
                _INSERT,
                (event.room_id, event.seq, event.id, event.kind.value, event.model_dump_json()),
            )
        except StoreError as exc:
            if not isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise
            held = self.database.fetch_one(
                "SELECT id FROM events WHERE room_id = ? AND seq = ?", (event.room_id, event.seq)
            )
            if held is not None and held[0] == event.id:
                return
            raise StoreError(
                f"SQLite store {self.database.path} already holds another event at seq "
                f"{event.seq} of room {event.room_id!r}: each seq of a room is stored once"
            ) from exc.__cause__

    def after(self, room_id: str, after_seq: int, limit: int | None) -> list[Event]:
        rows = self.database.fetch_all(
            "SELECT data FROM events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (room_id, after_seq, -1 if limit is None else limit),
        )
        return [Event.model_validate_json(data) for (data,) in rows]

    def recent(self, room_id: str, limit: int) -> list[Event]:
        if limit <= 0:
            return []
        # Walk the (room_id, seq) primary key backwards: cost grows with limit, not history.
        rows = self.database.fetch_all(
            "SELECT data FROM events WHERE room_id = ? ORDER BY seq DESC LIMIT ?",
            (room_id, limit),
        )
        return [Event.model_validate_json(data) for (data,) in reversed(rows)]

    def last_seq(self, room_id: str) -> int:
        row = self.database.fetch_one("SELECT max(seq) FROM events WHERE room_id = ?", (room_id,))
        return int(row[0]) if row[0] is not None else 0
