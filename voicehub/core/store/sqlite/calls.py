"""The calls table: each conversation's call in progress, with its fence for compare-and-set
writes, committed at once (another process may take the call up next)."""

from __future__ import annotations

from voicehub.core.store.base import CallRecord
from voicehub.core.store.sqlite.database import Database

# The checks sit in the statements, so SQLite's write lock makes them atomic across processes.
_INSERT = """
INSERT INTO calls (id, owner, open, fence, data) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO NOTHING
"""
_SWAP = "UPDATE calls SET owner = ?, open = ?, fence = ?, data = ? WHERE id = ? AND fence = ?"


class CallTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def swap(self, call: CallRecord, expected_fence: int) -> bool:
        values = (call.owner, int(call.state.open), call.fence, call.model_dump_json())
        if expected_fence == 0:
            inserted = self.database.write(_INSERT, (call.room_id, *values), durable=True)
            if inserted == 1:
                return True
        written = self.database.write(_SWAP, (*values, call.room_id, expected_fence), durable=True)
        return written == 1

    def get(self, room_id: str) -> CallRecord | None:
        row = self.database.fetch_one("SELECT data FROM calls WHERE id = ?", (room_id,))
        return CallRecord.model_validate_json(row[0]) if row else None

    def owned_by(self, owner: str) -> list[CallRecord]:
        rows = self.database.fetch_all(
            "SELECT data FROM calls WHERE owner = ? AND open = 1 ORDER BY id", (owner,)
        )
        return [CallRecord.model_validate_json(data) for (data,) in rows]
