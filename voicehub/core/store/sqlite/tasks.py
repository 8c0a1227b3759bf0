"""The tasks table: delegated work, with its fence for compare-and-set writes."""

from __future__ import annotations

from collections.abc import Sequence

from voicehub.core.store.base import TaskRecord, TaskStatus
from voicehub.core.store.sqlite.database import Database, conditions

_UPSERT = """
INSERT INTO tasks (id, parent_room_id, status, data) VALUES (?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET parent_room_id = excluded.parent_room_id,
    status = excluded.status, data = excluded.data
"""
# The check sits in the UPDATE, so SQLite's write lock makes it atomic across processes.
_SWAP = """
UPDATE tasks SET parent_room_id = ?, status = ?, data = ?
WHERE id = ? AND coalesce(json_extract(data, '$.fence'), 0) = ?
"""


class TaskTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def put(self, task: TaskRecord) -> None:
        """Insert or replace a task by id."""
        self.database.write(
            _UPSERT, (task.id, task.parent_room_id, task.status.value, task.model_dump_json())
        )

    def get(self, task_id: str) -> TaskRecord | None:
        row = self.database.fetch_one("SELECT data FROM tasks WHERE id = ?", (task_id,))
        return TaskRecord.model_validate_json(row[0]) if row else None

    def find(
        self, parent_room_id: str | None, statuses: Sequence[TaskStatus] | None
    ) -> list[TaskRecord]:
        where, params = conditions(("parent_room_id", parent_room_id), ("status", statuses))
        rows = self.database.fetch_all(f"SELECT data FROM tasks{where} ORDER BY rowid", params)
        return [TaskRecord.model_validate_json(data) for (data,) in rows]

    def count(self, parent_room_id: str) -> int:
        row = self.database.fetch_one(
            "SELECT count(*) FROM tasks WHERE parent_room_id = ?", (parent_room_id,)
        )
        return int(row[0])

    def swap(self, task: TaskRecord, expected_fence: int) -> bool:
        """Replace the stored task if its fence is `expected_fence` (group-committed)."""
        params = (task.parent_room_id, task.status.value, task.model_dump_json())
        return self.database.write(_SWAP, (*params, task.id, expected_fence)) == 1
