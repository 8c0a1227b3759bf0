"""The outbox: every result is persisted here before anything else happens to it.

Statuses: pending -> delivering -> delivered, or back to pending through interrupted
(requeued); held while no session is live; expired past its time to live; failed after its
maximum attempts or when a hook blocks it. `add` is idempotent by delivery id.

Ownership across instances sharing a store: every write is a compare-and-set on the record's
fence, and speaking takes a lease (`claim`): status delivering, owner, expiry, and the new fence
as its fencing token. No other instance may claim or change an item while the lease is live;
the speaker renews it (`leases`) and settles with the same fence. A lease left by a killed
instance expires and the item is free again (held, or spoken by the instance that holds the
conversation's call); that instance takes it over at once when it knows the holder speaks to
nobody (`claim(breaking=...)`: the call moved to it, or the holder's heartbeat is gone), and
the holder, if it still runs, cannot settle it any more (its fence is stale).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from voicehub.core.clock import Clock
from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus, Store
from voicehub.core.trusted import replace
from voicehub.delivery.policy import DeliveryStrategy
from voicehub.errors import StoreError

log = logging.getLogger("voicehub.delivery")
_TIE_STEP = 1e-6
_SWAP_TRIES = 8  # a write races at most the few instances touching one room
_RENEW_RETRY = 0.25  # seconds before a refused lease renewal is tried again

# Statuses a restarted service must pick up again. `delivering` means the process stopped
# mid-speech: the speech was never confirmed, so it is spoken again (it was not delivered).
UNFINISHED = (
    DeliveryStatus.PENDING,
    DeliveryStatus.DELIVERING,
    DeliveryStatus.INTERRUPTED,
    DeliveryStatus.HELD,
)


def new_delivery_id() -> str:
    """A fresh, unguessable delivery id."""
    return f"dlv-{os.urandom(16).hex()}"


class Outbox:
    """Durable delivery records on a `Store`.

    `wall` is the epoch clock used for time-to-live and leases (it must survive restarts and
    be shared by instances, unlike the monotonic clock the policy runs on); tests inject a
    virtual one. `owner` names this instance in leases; `lease` is how long a claim lasts
    without renewal (the speaker renews it every third of that).
    """

    def __init__(
        self,
        store: Store,
        *,
        ttl: float | None = 24 * 3600.0,
        max_attempts: int = 3,
        wall: Callable[[], float] = time.time,
        owner: str | None = None,
        lease: float = 15.0,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.store = store
        self.ttl = ttl
        self.max_attempts = max_attempts
        self.wall = wall
        self.owner = owner or f"instance-{uuid.uuid4().hex[:12]}"
        self.lease = lease
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
            id=delivery_id or new_delivery_id(),
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

    def leased_elsewhere(self, record: DeliveryRecord) -> bool:
        """Whether another instance holds a live lease on `record` (it may be speaking it)."""
        return (
            record.status is DeliveryStatus.DELIVERING
            and record.lease_owner not in ("", self.owner)
            and record.lease_until is not None
            and record.lease_until > self.wall()
        )

    def lease_left(self, record: DeliveryRecord) -> float:
        """Seconds until the lease on `record` runs out (0 when it has none)."""
        return max(0.0, (record.lease_until or 0.0) - self.wall())

    async def set_status(
        self,
        record: DeliveryRecord,
        status: DeliveryStatus,
        *,
        error: str = "",
        attempted: bool = False,
    ) -> DeliveryRecord:
        """Persist a status change (counting an attempt when `attempted`), releasing any lease.

        If another instance changed the record meanwhile, the change is applied to the fresh
        record; when that is final or leased elsewhere it is returned unchanged instead, so
        callers compare the returned status with the one they asked for.
        """
        return (await self._swap(record, status=status, error=error, attempted=attempted))[0]

    async def settle(
        self, record: DeliveryRecord, status: DeliveryStatus, clock: Clock, *, error: str = ""
    ) -> DeliveryRecord:
        """`set_status` for an injection's outcome, retried while the store is unreachable
        (for up to a lease, on `clock`): a spoken result not recorded as delivered would be
        spoken again. Still failing, it raises: the item stays queued, spoken again rather
        than lost."""
        delay, deadline = 0.05, clock.now() + self.lease
        while True:
            try:
                return await self.set_status(record, status, error=error)
            except StoreError:
                if clock.now() + delay > deadline:
                    raise
                log.warning("delivery %s: store unreachable, retrying its outcome", record.id)
                await clock.sleep(delay)
                delay = min(2 * delay, 1.0)

    async def claim(
        self, record: DeliveryRecord, *, breaking: str = ""
    ) -> tuple[DeliveryRecord, bool]:
        """Take the lease to speak `record` now (status delivering, one more attempt).
        Returns the fresh record and whether this instance won it. `breaking` names an
        instance whose live lease may be taken over (it is known not to be speaking to
        anyone: its call moved, or it is gone)."""
        return await self._swap(
            record, status=DeliveryStatus.DELIVERING, attempted=True, lease=True, breaking=breaking
        )

    async def _swap(
        self,
        record: DeliveryRecord,
        *,
        status: DeliveryStatus,
        error: str = "",
        attempted: bool = False,
        lease: bool = False,
        breaking: str = "",
    ) -> tuple[DeliveryRecord, bool]:
        current = record
        for _ in range(_SWAP_TRIES):
            leased = self.leased_elsewhere(current) and current.lease_owner != breaking
            if leased or (lease and current.status.final):
                return current, False
            now = self.wall()
            updated = replace(
                current,
                status=status,
                error=error,
                updated_at=now,
                attempts=current.attempts + (1 if attempted else 0),
                fence=current.fence + 1,
                lease_owner=self.owner if lease else "",
                lease_until=now + self.lease if lease else None,
            )
            if await self.store.swap_delivery(updated, expected_fence=current.fence):
                return updated, True
            fresh = await self.store.get_delivery(record.id)
            if fresh is None or fresh.status.final:  # settled elsewhere: leave it be
                return fresh or current, False
            current = fresh
        raise StoreError(f"delivery {record.id} kept changing under {self.owner}: gave up")

    async def renew(self, record: DeliveryRecord) -> DeliveryRecord | None:
        """Extend this instance's lease on `record`; None if it was lost meanwhile."""
        renewed = replace(record, fence=record.fence + 1, lease_until=self.wall() + self.lease)
        if await self.store.swap_delivery(renewed, expected_fence=record.fence):
            return renewed
        return None

    @contextlib.asynccontextmanager
    async def leases(self, records: list[DeliveryRecord], clock: Clock) -> AsyncIterator[None]:
        """Keep the leases on `records` alive while the body runs; `records` is updated in
        place with the renewed records, whose fences the outcome is written with."""

        async def renew_forever() -> None:
            # A renewal the store refuses (a Redis restart) is tried again soon; it must not
            # end the renewals nor escape this context: the speech goes on, and its outcome
            # is written with the fence of the last renewal that succeeded.
            delay = self.lease / 3
            while True:
                await clock.sleep(delay)
                delay = self.lease / 3
                for i, record in enumerate(records):
                    try:
                        renewed = await self.renew(record)
                    except StoreError as exc:
                        log.warning("delivery %s: could not renew its lease: %s", record.id, exc)
                        delay = min(delay, _RENEW_RETRY)
                        continue
                    if renewed is None:  # a stall longer than the lease, or a takeover
                        await self._log_lost(record)
                    else:
                        records[i] = renewed

        renewing = asyncio.create_task(renew_forever())
        try:
            yield
        finally:
            await cancel_and_wait(renewing)

    async def _log_lost(self, record: DeliveryRecord) -> None:
        """Say who has the record now: a lease taken over by the instance the call moved to
        is expected; one taken by an instance without the call is not."""
        try:
            now = await self.store.get_delivery(record.id)
        except StoreError:
            now = None
        held = "unknown" if now is None else f"{now.status} by {now.lease_owner or 'nobody'}"
        log.warning(
            "%s lost the lease on delivery %s while speaking (now %s)", self.owner, record.id, held
        )

    def expired(self, record: DeliveryRecord) -> bool:
        """Whether `record` is past its time to live."""
        return record.expires_at is not None and self.wall() >= record.expires_at

    def seconds_left(self, record: DeliveryRecord) -> float | None:
        """Seconds until `record` expires (<= 0 when it has), or None without a TTL."""
        return None if record.expires_at is None else record.expires_at - self.wall()

    async def unfinished(self, room_id: str | None = None) -> list[DeliveryRecord]:
        """Records not yet delivered, expired or failed, oldest first."""
        return await self.store.list_deliveries(room_id=room_id, statuses=UNFINISHED)
