"""The instances table: each live instance's heartbeat, committed at once (other processes
read it)."""

from __future__ import annotations

from voicehub.core.store.base import InstanceRecord
from voicehub.core.store.sqlite.database import Database

_UPSERT = """
INSERT INTO instances (id, data) VALUES (?, ?)
ON CONFLICT (id) DO UPDATE SET data = excluded.data
"""


class InstanceTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def beat(self, instance: InstanceRecord) -> None:
        self.database.write(_UPSERT, (instance.id, instance.model_dump_json()), durable=True)

    def find(self) -> list[InstanceRecord]:
        rows = self.database.fetch_all("SELECT data FROM instances ORDER BY id")
        return [InstanceRecord.model_validate_json(data) for (data,) in rows]

    def remove(self, instance_id: str) -> None:
        self.database.write("DELETE FROM instances WHERE id = ?", (instance_id,), durable=True)
