"""The rooms table: one row per room, child rooms with their parent's id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pydantic_core

from voicehub.core.store.base import RoomRecord, RoomStatus
from voicehub.core.store.sqlite.database import Database, conditions

# Upserts use ON CONFLICT DO UPDATE rather than INSERT OR REPLACE: the row keeps its rowid, so
# `ORDER BY rowid` lists records in first-insertion order, as the memory store's dicts do.
_UPSERT = """
INSERT INTO rooms (id, parent_id, status, metadata, created_at, closed_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET parent_id = excluded.parent_id, status = excluded.status,
    metadata = excluded.metadata, created_at = excluded.created_at,
    closed_at = excluded.closed_at
"""
_COLUMNS = "id, parent_id, status, metadata, created_at, closed_at"


class RoomTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def put(self, room: RoomRecord) -> None:
        """Insert or replace a room by id."""
        self.database.write(_UPSERT, _row(room))

    def get(self, room_id: str) -> RoomRecord | None:
        row = self.database.fetch_one(f"SELECT {_COLUMNS} FROM rooms WHERE id = ?", (room_id,))
        return _from_row(row) if row else None

    def find(self, parent_id: str | None, status: RoomStatus | None) -> list[RoomRecord]:
        where, params = conditions(("parent_id", parent_id), ("status", status))
        rows = self.database.fetch_all(
            f"SELECT {_COLUMNS} FROM rooms{where} ORDER BY rowid", params
        )
        return [_from_row(row) for row in rows]


def _row(room: RoomRecord) -> tuple[Any, ...]:
    metadata = pydantic_core.to_json(room.metadata).decode()  # pydantic's own JSON rules
    return (room.id, room.parent_id, room.status.value, metadata, room.created_at, room.closed_at)


def _from_row(row: Sequence[Any]) -> RoomRecord:
    room_id, parent_id, status, metadata, created_at, closed_at = row
    return RoomRecord(
        id=room_id,
        parent_id=parent_id,
        status=RoomStatus(status),
        metadata=json.loads(metadata),
        created_at=created_at,
        closed_at=closed_at,
    )
