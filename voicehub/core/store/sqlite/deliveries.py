"""The deliveries table: the outbox. Its writes commit before they return, except the
`delivering` mark of a claim or lease renewal (see `SQLiteStore.update_delivery`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.sqlite.database import Database, conditions

_INSERT = """
INSERT OR IGNORE INTO deliveries (id, room_id, status, created_at, data) VALUES (?, ?, ?, ?, ?)
"""
_UPSERT = """
INSERT INTO deliveries (id, room_id, status, created_at, data) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET room_id = excluded.room_id, status = excluded.status,
    created_at = excluded.created_at, data = excluded.data
"""
# The check sits in the UPDATE, so SQLite's write lock makes it atomic across processes.
_SWAP = """
UPDATE deliveries SET room_id = ?, status = ?, created_at = ?, data = ?
WHERE id = ? AND json_extract(data, '$.fence') IS ?
"""


class DeliveryTable:
    def __init__(self, database: Database) -> None:
        self.database = database

    def insert(self, delivery: DeliveryRecord) -> bool:
        """Insert unless the id is stored already (committed now); True if inserted."""
        return self.database.write(_INSERT, _row(delivery), durable=True) == 1

    def put(self, delivery: DeliveryRecord) -> None:
        self.database.write(_UPSERT, _row(delivery), durable=_durable(delivery))

    def swap(self, delivery: DeliveryRecord, expected_fence: int) -> bool:
        params = (*_row(delivery)[1:], delivery.id, expected_fence)
        return self.database.write(_SWAP, params, durable=_durable(delivery)) == 1

    def get(self, delivery_id: str) -> DeliveryRecord | None:
        row = self.database.fetch_one("SELECT data FROM deliveries WHERE id = ?", (delivery_id,))
        return DeliveryRecord.model_validate_json(row[0]) if row else None

    def find(
        self, room_id: str | None, statuses: Sequence[DeliveryStatus] | None
    ) -> list[DeliveryRecord]:
        where, params = conditions(("room_id", room_id), ("status", statuses))
        rows = self.database.fetch_all(
            f"SELECT data FROM deliveries{where} ORDER BY created_at, id", params
        )
        return [DeliveryRecord.model_validate_json(data) for (data,) in rows]


def _durable(delivery: DeliveryRecord) -> bool:
    """Every outbox write commits at once but the `delivering` mark (a claim, a renewal)."""
    return delivery.status is not DeliveryStatus.DELIVERING


def _row(delivery: DeliveryRecord) -> tuple[Any, ...]:
    return (
        delivery.id,
        delivery.room_id,
        delivery.status.value,
        delivery.created_at,
        delivery.model_dump_json(),
    )
