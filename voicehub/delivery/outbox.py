"""The outbox: every result is persisted here before anything else happens to it.

Statuses: pending -> delivering -> delivered, or back to pending through interrupted
(requeued); held while no session is live; expired past its time to live; failed after its
maximum attempts or when a hook blocks it. `add` is idempotent by delivery id.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from typing import Any

from voicehub.core.store.base import DeliveryRecord, DeliveryStatus, Store
from voicehub.core.trusted import replace
from voicehub.delivery.policy import DeliveryStrategy

_TIE_STEP = 1e-6

# Statuses a restarted service must pick up again. `delivering` means the process stopped
# mid-speech: the speech was never confirmed, so it is spoken again (it was not delivered).
UNFINISHED = (
    DeliveryStatus.PENDING,
    DeliveryStatus.DELIVERING,
    DeliveryStatus.INTERRUPTED,
    DeliveryStatus.HELD,
)


class Outbox:
    """Durable delivery records on a `Store`.

    `wall` is the epoch clock used for time-to-live (it must survive restarts, unlike the
    monotonic clock the policy runs on); tests inject a virtual one.
    """

    def __init__(
        self,
        store: Store,
        *,
        ttl: float | None = 24 * 3600.0,
        max_attempts: int = 3,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.store = store
        self.ttl = ttl
        self.max_attempts = max_attempts
        self.wall = wall
        self._last_created = -math.inf

    async def add(
        self,
        room_id: str,
        content: str,
        strategy: DeliveryStrategy,
        *,
        arrived_at: float,
        metadata: dict[str, Any] | None = None,
        delivery_id: str | None = None,
    ) -> tuple[DeliveryRecord, bool]:
        """Persist a new result. Returns the record and whether it is new (False when the
        id was already in the outbox, in which case the stored record is returned as is)."""
        # Strictly increasing, so the store's (created_at, id) order is the arrival order
        # even when a coarse or virtual wall clock stamps two results alike.
        now = self._last_created = max(self.wall(), self._last_created + _TIE_STEP)
        record = DeliveryRecord(
            id=delivery_id or f"dlv-{uuid.uuid4().hex}",
            room_id=room_id,
            content=content,
            strategy=strategy.to_json(),
            status=DeliveryStatus.PENDING,
            max_attempts=self.max_attempts,
            created_at=now,
            arrived_at=arrived_at,
            expires_at=now + self.ttl if self.ttl is not None else None,
            updated_at=now,
            metadata=dict(metadata or {}),
        )
        if await self.store.put_delivery(record):
            return record, True
        existing = await self.store.get_delivery(record.id)
        return (existing or record), False

    async def set_status(
        self,
        record: DeliveryRecord,
        status: DeliveryStatus,
        *,
        error: str = "",
        attempted: bool = False,
    ) -> DeliveryRecord:
        """Persist a status change (counting an attempt when `attempted`)."""
        updated = replace(
            record,
            status=status,
            error=error,
            updated_at=self.wall(),
            attempts=record.attempts + (1 if attempted else 0),
        )
        await self.store.update_delivery(updated)
        return updated

    def expired(self, record: DeliveryRecord) -> bool:
        """Whether `record` is past its time to live."""
        return record.expires_at is not None and self.wall() >= record.expires_at

    def seconds_left(self, record: DeliveryRecord) -> float | None:
        """Seconds until `record` expires (<= 0 when it has), or None without a TTL."""
        return None if record.expires_at is None else record.expires_at - self.wall()

    async def unfinished(self, room_id: str | None = None) -> list[DeliveryRecord]:
        """Records not yet delivered, expired or failed, oldest first."""
        return await self.store.list_deliveries(room_id=room_id, statuses=UNFINISHED)
