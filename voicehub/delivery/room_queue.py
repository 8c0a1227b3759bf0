"""One room's delivery queue: its pending items, live session, and what the driver keeps
per item between attempts (retry back-off, interruptions, pre-rendering)."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

from voicehub.core.store.base import DeliveryRecord
from voicehub.delivery.injector import ActivityFeed, Injector, PreparingInjector
from voicehub.delivery.policy import DeliveryStrategy, PendingItem, strategy_from_json

__all__ = ["OFFER_AFTER", "RoomQueue", "queue_id"]

OFFER_AFTER = 2
"""Interruptions after which a result is offered ("shall I read them?") instead of spoken."""


def queue_id(item: PendingItem) -> str:
    """The delivery id of a queue item (`RoomQueue.stamp` prefixes a sequence number)."""
    return item.delivery_id.partition(":")[2]


class RoomQueue:
    """One room's pending items, session and driver task."""

    def __init__(self, room_id: str) -> None:
        self.room_id = room_id
        self.items: dict[str, tuple[DeliveryRecord, PendingItem]] = {}
        self.not_before: dict[str, float] = {}  # retry back-off after a failed injection
        # Interruptions per item in this process: they never use a result up; after
        # OFFER_AFTER of them the result is offered instead of spoken.
        self.interruptions: Counter[str] = Counter()
        # Attempts that did not count against `max_attempts` (interrupted, deferred, declined).
        self.spared: Counter[str] = Counter()
        self.prepared: dict[str, str] = {}  # id -> text handed to the injector's `prepare`
        self.order = itertools.count()
        self.injector: Injector | None = None
        self.activity: ActivityFeed | None = None
        # The injector again when it pre-renders speech: isinstance on a runtime-checkable
        # protocol inspects every member (10-20 us), too slow for each step of the driver.
        self.preparing: PreparingInjector | None = None
        self.changed = asyncio.Event()
        self.driver: asyncio.Task[None] | None = None
        self.watcher: asyncio.Task[None] | None = None

    def stamp(
        self,
        record: DeliveryRecord,
        arrived_at: float,
        strategy: DeliveryStrategy | None = None,
    ) -> None:
        """Queue `record` as arrived at `arrived_at`, keeping its place if already queued.
        `strategy` is the record's, when the caller has it parsed already.

        The policy breaks arrival-time ties by `delivery_id`; results stamped alike (a
        restart, a coarse clock) must still go in arrival order, so the policy sees a key
        `"<sequence>:<delivery id>"` instead of the bare id.
        """
        queued = self.items.get(record.id)
        key = queued[1].delivery_id if queued else f"{next(self.order):012d}:{record.id}"
        if strategy is None:
            strategy = strategy_from_json(record.strategy)
        self.items[record.id] = (record, PendingItem(key, arrived_at, strategy))
        self.changed.set()

    def connect(self, injector: Injector | None, activity: ActivityFeed | None) -> None:
        """The room's live session (None, None when it left)."""
        self.injector, self.activity = injector, activity
        self.preparing = injector if isinstance(injector, PreparingInjector) else None

    def update(self, record: DeliveryRecord) -> None:
        self.items[record.id] = (record, self.items[record.id][1])

    def forget(self, delivery_id: str) -> None:
        self.items.pop(delivery_id, None)
        self.not_before.pop(delivery_id, None)
        self.interruptions.pop(delivery_id, None)
        self.spared.pop(delivery_id, None)
        if self.prepared.pop(delivery_id, None) is not None and self.preparing is not None:
            self.preparing.discard(delivery_id)

    def prepare_all(self) -> None:
        """Let a preparing injector get every queued item ready (pre-rendered speech)."""
        injector = self.preparing
        if injector is None:
            return
        for delivery_id, (record, _) in self.items.items():
            if self.prepared.get(delivery_id) != record.content:
                self.prepared[delivery_id] = record.content
                injector.prepare(delivery_id, record.content)

    def detached(self) -> None:
        """The session left: what it prepared went with it."""
        self.prepared.clear()
