"""The delivery service: one small asyncio driver per room around the pure policy.

Each room has its own queue and driver task, so rooms never wait on each other. A driver
asks `policy.decide` what to do, sleeps on the hub clock until the wake time or the next
change (activity, a new item, a session attaching), and injects through the room's
`Injector`. Every attempt fires BEFORE_DELIVER (may block or rewrite) and AFTER_DELIVER (sees
the outcome and any error), with the strategy in `event.metadata["strategy"]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookTrigger
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.delivery.injector import InjectOutcome, Injector
from voicehub.delivery.outbox import Outbox
from voicehub.delivery.policy import (
    ActivityState,
    Deliver,
    DeliveryStrategy,
    PendingItem,
    WakeAt,
    decide,
    parse_strategy,
    strategy_from_json,
)

if TYPE_CHECKING:
    from voicehub.core.hub import Hub

log = logging.getLogger("voicehub.delivery")


class ActivityFeed(Protocol):
    """What the driver reads from a room's activity (VoiceActivity satisfies it)."""

    @property
    def version(self) -> int: ...

    def snapshot(self) -> ActivityState: ...

    async def wait_for_change(self, after_version: int) -> Any: ...


class _RoomQueue:
    """One room's pending items, session and driver task."""

    __slots__ = ("activity", "changed", "driver", "injector", "items", "room_id", "watcher")

    def __init__(self, room_id: str) -> None:
        self.room_id = room_id
        self.items: dict[str, tuple[DeliveryRecord, PendingItem]] = {}
        self.injector: Injector | None = None
        self.activity: ActivityFeed | None = None
        self.changed = asyncio.Event()
        self.driver: asyncio.Task[None] | None = None
        self.watcher: asyncio.Task[None] | None = None


class DeliveryService:
    """Speaks results into rooms at the right moment, exactly once, and never loses one."""

    def __init__(
        self,
        hub: Hub,
        *,
        default_strategy: DeliveryStrategy | str | None = None,
        ttl: float | None = 24 * 3600.0,
        max_attempts: int = 3,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.hub = hub
        self.clock = hub.clock
        self._default_strategy = default_strategy
        self.outbox = Outbox(hub.store, ttl=ttl, max_attempts=max_attempts, wall=wall)
        self._rooms: dict[str, _RoomQueue] = {}
        self._started = False

    @property
    def default_strategy(self) -> DeliveryStrategy:
        """The service's own default, else the desk's (`hub.delivery_strategy`)."""
        chosen = self._default_strategy
        return parse_strategy(chosen if chosen is not None else self.hub.delivery_strategy)

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Reload every unfinished item from the store; they wait for a live session."""
        if self._started:
            return
        self._started = True
        for record in await self.outbox.unfinished():
            self._enqueue(record)

    async def aclose(self) -> None:
        """Stop the drivers. Undelivered items stay in the store for the next start."""
        for queue in list(self._rooms.values()):
            await self._stop(queue)
        self._rooms.clear()
        self._started = False

    # -- public API --------------------------------------------------------------------

    async def deliver(
        self,
        room_id: str,
        content: str,
        *,
        strategy: Any = None,
        metadata: dict[str, Any] | None = None,
        delivery_id: str | None = None,
    ) -> str:
        """Persist a result and schedule it. Idempotent by `delivery_id`."""
        chosen = parse_strategy(strategy, self.default_strategy)
        record, new = await self.outbox.add(
            room_id,
            content,
            chosen,
            arrived_at=self.clock.now(),
            metadata=metadata,
            delivery_id=delivery_id,
        )
        if new or (not record.status.final and record.id not in self._queue(room_id).items):
            self._enqueue(record)
            queue = self._queue(room_id)
            if queue.injector is None:
                await self._hold(queue, record.id)
        return record.id

    async def attach(self, room_id: str, injector: Injector, activity: ActivityFeed) -> None:
        """A session for this room's conversation went live: held items become pending."""
        queue = self._queue(room_id)
        await self._stop(queue)
        queue.injector, queue.activity = injector, activity
        for delivery_id, (record, item) in list(queue.items.items()):
            if record.status is DeliveryStatus.HELD:
                record = await self.outbox.set_status(record, DeliveryStatus.PENDING)
                queue.items[delivery_id] = (record, item)
        queue.watcher = asyncio.create_task(self._watch(queue, activity))
        queue.driver = asyncio.create_task(self._drive(queue))

    async def detach(self, room_id: str) -> None:
        """The session ended: stop speaking and hold what is left for the next session."""
        queue = self._rooms.get(room_id)
        if queue is None:
            return
        await self._stop(queue)
        queue.injector = queue.activity = None
        for delivery_id in list(queue.items):
            await self._hold(queue, delivery_id)

    def pending(self, room_id: str) -> list[DeliveryRecord]:
        """Items of `room_id` not yet delivered (in memory)."""
        queue = self._rooms.get(room_id)
        return [record for record, _ in queue.items.values()] if queue else []

    # -- internals ---------------------------------------------------------------------

    def _queue(self, room_id: str) -> _RoomQueue:
        queue = self._rooms.get(room_id)
        if queue is None:
            queue = self._rooms[room_id] = _RoomQueue(room_id)
        return queue

    def _enqueue(self, record: DeliveryRecord) -> None:
        queue = self._queue(record.room_id)
        # Arrival times from a previous process mean nothing on this monotonic clock.
        item = PendingItem(record.id, self.clock.now(), strategy_from_json(record.strategy))
        queue.items[record.id] = (record, item)
        queue.changed.set()

    async def _hold(self, queue: _RoomQueue, delivery_id: str) -> None:
        record, item = queue.items[delivery_id]
        if record.status is not DeliveryStatus.HELD:
            record = await self.outbox.set_status(record, DeliveryStatus.HELD)
            queue.items[delivery_id] = (record, item)
            await self._after(record, "held", item.strategy)

    async def _stop(self, queue: _RoomQueue) -> None:
        for task in (queue.driver, queue.watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        queue.driver = queue.watcher = None

    async def _watch(self, queue: _RoomQueue, activity: ActivityFeed) -> None:
        version = activity.version
        while True:
            await activity.wait_for_change(version)
            version = activity.version
            queue.changed.set()

    async def _drive(self, queue: _RoomQueue) -> None:
        while True:
            queue.changed.clear()
            try:
                await self._step(queue)
            except Exception:  # keep the room's driver alive; the items stay in the outbox
                log.exception("delivery driver error in room %s", queue.room_id)
                await queue.changed.wait()

    async def _step(self, queue: _RoomQueue) -> None:
        await self._expire(queue)
        activity = queue.activity
        if activity is None or not queue.items:
            await queue.changed.wait()
            return
        now = self.clock.now()
        action = decide(activity.snapshot(), [item for _, item in queue.items.values()], now)
        if isinstance(action, Deliver):
            await self._attempt(queue, action.items)
        elif isinstance(action, WakeAt):
            await self._wait(queue, action.time - now)
        else:
            await queue.changed.wait()

    async def _wait(self, queue: _RoomQueue, seconds: float) -> None:
        """Sleep `seconds` on the hub clock, or less if something changes."""
        changed = asyncio.ensure_future(queue.changed.wait())
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        try:
            await asyncio.wait({changed, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            sleeper.cancel()

    async def _expire(self, queue: _RoomQueue) -> None:
        for delivery_id, (record, item) in list(queue.items.items()):
            if self.outbox.expired(record):
                del queue.items[delivery_id]
                record = await self.outbox.set_status(
                    record, DeliveryStatus.EXPIRED, error="time to live passed"
                )
                await self._after(record, "expired", item.strategy)

    async def _attempt(self, queue: _RoomQueue, items: tuple[PendingItem, ...]) -> None:
        injector = queue.injector
        assert injector is not None
        records = [queue.items[item.delivery_id][0] for item in items]
        strategy = items[0].strategy
        texts = []
        for i, record in enumerate(records):
            outcome = await self.hub.run_hooks(
                HookTrigger.BEFORE_DELIVER, self._event(record, strategy)
            )
            if outcome.blocked:
                del queue.items[record.id]
                failed = await self.outbox.set_status(
                    record,
                    DeliveryStatus.FAILED,
                    attempted=True,
                    error=f"blocked by hook {outcome.blocked_by}: {outcome.reason}",
                )
                await self._after(failed, "failed", strategy, failed.error)
                records[i] = failed
                continue
            texts.append(outcome.event.text)
        live = [r for r in records if not r.status.final]
        if not live:
            return
        live = [
            await self.outbox.set_status(r, DeliveryStatus.DELIVERING, attempted=True) for r in live
        ]
        metadata = {
            "delivery_ids": [r.id for r in live],
            "strategy": _name(strategy),
            **live[0].metadata,
        }
        try:
            result = await injector.inject(
                "\n\n".join(texts),
                allow_interrupt=_name(strategy) == "immediate",
                metadata=metadata,
            )
            error = ""
        except asyncio.CancelledError:
            # The session went away mid-speech: the item was not delivered; hold it.
            for record in live:
                queue.items[record.id] = (record, queue.items[record.id][1])
            raise
        except Exception as exc:
            log.exception("injection failed in room %s", queue.room_id)
            result, error = None, f"{type(exc).__name__}: {exc}"
        for record in live:
            await self._settle(queue, record, result, error, strategy)

    async def _settle(
        self,
        queue: _RoomQueue,
        record: DeliveryRecord,
        result: InjectOutcome | None,
        error: str,
        strategy: DeliveryStrategy,
    ) -> None:
        item = queue.items[record.id][1]
        if result is InjectOutcome.FINISHED:
            del queue.items[record.id]
            done = await self.outbox.set_status(record, DeliveryStatus.DELIVERED)
            await self._after(done, "delivered", strategy)
            return
        outcome = "interrupted" if result is InjectOutcome.INTERRUPTED else "failed"
        if record.attempts >= record.max_attempts:
            del queue.items[record.id]
            failed = await self.outbox.set_status(
                record,
                DeliveryStatus.FAILED,
                error=error or f"{outcome} on each of {record.attempts} attempts",
            )
            await self._after(failed, "failed", strategy, failed.error)
            return
        status = DeliveryStatus.INTERRUPTED if result is not None else DeliveryStatus.PENDING
        requeued = await self.outbox.set_status(record, status, error=error)
        queue.items[record.id] = (requeued, item)
        await self._after(requeued, outcome, strategy, error)

    def _event(self, record: DeliveryRecord, strategy: DeliveryStrategy, **extra: Any) -> Event:
        return Event(
            kind=EventKind.DELIVERY,
            text=record.content,
            source="delivery",
            role="assistant",
            source_type=ChannelType.SYSTEM,
            room_id=record.room_id,
            metadata={
                "delivery_id": record.id,
                "strategy": _name(strategy),
                "attempt": record.attempts + 1,
                **record.metadata,
                **extra,
            },
        )

    async def _after(
        self, record: DeliveryRecord, outcome: str, strategy: DeliveryStrategy, error: str = ""
    ) -> None:
        await self.hub.run_hooks(
            HookTrigger.AFTER_DELIVER,
            self._event(
                record, strategy, outcome=outcome, error=error or None, attempt=record.attempts
            ),
        )


def _name(strategy: DeliveryStrategy) -> str:
    return str(strategy.to_json()["kind"])
