"""The delivery service: one small asyncio driver per room around the pure policy.

Each room has its own queue and driver task, so rooms never wait on each other. A driver
asks `policy.decide` what to do, sleeps on the hub clock until the wake time, the next
expiry or retry, or the next change (activity, a new item, a session attaching), and
injects through the room's `Injector`. Every attempt fires BEFORE_DELIVER (may block or
rewrite) and AFTER_DELIVER (sees the outcome, any error, and whether the item is `final`),
with the strategy name in `event.metadata["strategy"]`. A failing hook is logged; it never
stops the driver nor makes an item be spoken twice.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from voicehub.core.clock import wait_or_sleep
from voicehub.core.hooks import HookTrigger
from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.delivery.hook_events import delivery_event, strategy_name
from voicehub.delivery.injector import ActivityFeed, Injector, InjectOutcome
from voicehub.delivery.outbox import Outbox, new_delivery_id
from voicehub.delivery.policy import (
    Deliver,
    DeliveryStrategy,
    PendingItem,
    StrategyLike,
    WakeAt,
    decide,
    parse_strategy,
)
from voicehub.delivery.room_queue import OFFER_AFTER, RoomQueue, queue_id
from voicehub.errors import StoreError

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime

__all__ = ["ActivityFeed", "DeliveryService", "LeaseBreaker"]

log = logging.getLogger("voicehub.delivery")
_TTL = "time to live passed"
PUT_RETRY_SECONDS = 30.0
"""How long a new result is retried while the store is unreachable before it is given up."""
_OUTCOMES = frozenset(InjectOutcome)

LeaseBreaker = Callable[[DeliveryRecord], Awaitable[bool]]
"""Whether another instance's live lease on a record may be taken over now (see `Outbox`)."""


class DeliveryService:
    """Speaks results into rooms at the right moment, exactly once, and never loses one.

    `retry_delay` spaces the attempts of an item whose injection raised (doubling each
    time), so an outage of the voice stack does not use up `max_attempts` at once: by
    default the attempts span 31 s (1 + 2 + 4 + 8 + 16), as long as a store outage is
    ridden out.
    `owner` and `lease` name this instance in delivery leases and say how long one lasts
    without renewal (see `Outbox`). `lease_breaker`, when given, is asked about a record
    another instance holds a lease on: True takes it over now instead of waiting it out.
    """

    def __init__(
        self,
        hub: Runtime,
        *,
        default_strategy: StrategyLike = "wait_for_idle",
        ttl: float | None = 24 * 3600.0,
        max_attempts: int = 6,
        retry_delay: float = 1.0,
        wall: Callable[[], float] = time.time,
        owner: str | None = None,
        lease: float = 15.0,
        lease_breaker: LeaseBreaker | None = None,
    ) -> None:
        self.hub = hub
        self.clock = hub.clock
        self.default_strategy = parse_strategy(default_strategy)
        self.outbox = Outbox(
            hub.store, ttl=ttl, max_attempts=max_attempts, wall=wall, owner=owner, lease=lease
        )
        self.retry_delay = retry_delay
        self.lease_breaker = lease_breaker
        self.handing_over = False  # see `hand_over_results`
        self._rooms: dict[str, RoomQueue] = {}
        self._started = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Reload every unfinished item from the store; they are held for a live session."""
        if self._started:
            return
        self._started = True
        for record in await self.outbox.unfinished():
            queue = self._queue(record.room_id)
            # Arrival times from a previous process mean nothing on this monotonic clock.
            queue.stamp(record, self.clock.now())
            if queue.injector is None:
                await self._hold(queue, record.id)
        for queue in list(self._rooms.values()):
            await self._expire(queue)
            self._unload(queue)

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
        strategy: StrategyLike | None = None,
        metadata: dict[str, Any] | None = None,
        delivery_id: str | None = None,
    ) -> str:
        """Persist a result and schedule it. Idempotent by `delivery_id` (the stored
        record wins, even if the id is handed in again for another room)."""
        chosen = parse_strategy(strategy, self.default_strategy)
        now = self.clock.now()
        # The id is fixed before the first try: a write that landed but whose answer was
        # lost is found again by it, not written twice (it would be spoken twice).
        delivery_id = delivery_id or new_delivery_id()
        delay, deadline = 0.05, now + PUT_RETRY_SECONDS
        while True:
            try:
                record, new = await self.outbox.add(
                    room_id,
                    content,
                    chosen,
                    arrived_at=now,
                    metadata=metadata,
                    delivery_id=delivery_id,
                )
                break
            except StoreError:  # unreachable (a Redis restart, a locked file): a result
                if self.clock.now() + delay > deadline:  # is kept, not dropped, if it can be
                    raise
                log.warning("delivery %s: store unreachable, retrying to keep it", delivery_id)
                await self.clock.sleep(delay)
                delay = min(2 * delay, 1.0)
        queue = self._queue(record.room_id)
        if record.status.final or (not new and record.id in queue.items):
            self._unload(queue)
            return record.id
        queue.stamp(record, now, chosen if new else None)
        if queue.injector is None:
            await self._hold(queue, record.id)
        return record.id

    async def attach(self, room_id: str, injector: Injector, activity: ActivityFeed) -> None:
        """A session for this room's conversation went live: held items become pending.

        Held items count as arriving now, so the caller who just connected gets the full
        wait of each strategy (`max_wait` included) before a held result is spoken.
        """
        queue = self._queue(room_id)
        await self._stop(queue)
        queue.connect(injector, activity)
        queue.not_before.clear()
        queue.detached()  # a new session prepares afresh
        # Another instance may have added results for this conversation since we started.
        for record in await self.outbox.unfinished(room_id):
            if record.id not in queue.items:
                queue.stamp(record, self.clock.now())
        for record, _ in list(queue.items.values()):
            await self._release(queue, record)
        queue.watcher = asyncio.create_task(self._watch(queue, activity))
        queue.driver = asyncio.create_task(self._drive(queue))

    async def detach(self, room_id: str) -> None:
        """The session ended: stop speaking and hold what is left for the next session."""
        queue = self._rooms.get(room_id)
        if queue is None:
            return
        await self._stop(queue)
        queue.connect(None, None)
        queue.detached()
        for delivery_id in list(queue.items):
            await self._hold(queue, delivery_id)
        self._unload(queue)

    async def notice(self, room_id: str, delivery_id: str) -> None:
        """Another instance added a delivery (announced through the store): drive it here if
        this instance holds the room's live session."""
        queue = self._rooms.get(room_id)
        if queue is None or queue.injector is None or delivery_id in queue.items:
            return
        record = await self.outbox.store.get_delivery(delivery_id)
        if record is not None and not record.status.final:
            queue.stamp(record, self.clock.now())
            await self._release(queue, record)

    def hand_over_results(self) -> None:
        """This instance hands its calls over to another (it drains): start speaking no
        more results here. A result started here would be cut by the hand-over and spoken
        again, from its start, by the instance the call moves to; waiting, it is held when
        its call leaves and that instance speaks it once. Results already being spoken go
        on (the drain waits for them)."""
        self.handing_over = True

    def speaking(self, room_id: str) -> bool:
        """Whether this instance is speaking (or about to speak) a result into `room_id`:
        it holds the lease on one."""
        queue = self._rooms.get(room_id)
        return queue is not None and any(
            record.status is DeliveryStatus.DELIVERING and record.lease_owner == self.outbox.owner
            for record, _ in queue.items.values()
        )

    def pending(self, room_id: str) -> list[DeliveryRecord]:
        """Items of `room_id` not yet delivered (in memory)."""
        queue = self._rooms.get(room_id)
        return [record for record, _ in queue.items.values()] if queue else []

    # -- internals ---------------------------------------------------------------------

    def _queue(self, room_id: str) -> RoomQueue:
        if room_id not in self._rooms:
            self._rooms[room_id] = RoomQueue(room_id)
        return self._rooms[room_id]

    def _unload(self, queue: RoomQueue) -> None:
        """Drop the empty queue of a room with no live session (`attach` makes a new one):
        kept, every room ever called would stay in memory. Held items stay in memory for
        `pending` (call-backs read them) until delivered or expired."""
        if not queue.items and queue.injector is None and self._rooms.get(queue.room_id) is queue:
            del self._rooms[queue.room_id]

    async def _release(self, queue: RoomQueue, record: DeliveryRecord) -> None:
        """A held item of a live session becomes pending (arriving now)."""
        if record.status is DeliveryStatus.HELD:
            pending = await self.outbox.set_status(record, DeliveryStatus.PENDING)
            if pending.status.final:
                queue.forget(record.id)
            else:
                queue.stamp(pending, self.clock.now())

    def _defer(self, queue: RoomQueue, record: DeliveryRecord) -> None:
        """Another instance owns `record` now: try again when its lease runs out."""
        if record.status.final:
            queue.forget(record.id)
            return
        queue.update(record)
        wait = max(self.outbox.lease_left(record), self.retry_delay)
        queue.not_before[record.id] = self.clock.now() + wait
        log.info(
            "delivery %s: %s by %s; trying again in %.1f s",
            record.id,
            record.status,
            record.lease_owner or "nobody",
            wait,
        )

    async def _hold(self, queue: RoomQueue, delivery_id: str) -> None:
        record, item = queue.items[delivery_id]
        if record.status is not DeliveryStatus.HELD:
            record = await self.outbox.set_status(record, DeliveryStatus.HELD)
            queue.update(record)
            await self._after(record, "held", item.strategy)

    async def _stop(self, queue: RoomQueue) -> None:
        for task in (queue.driver, queue.watcher):
            if task is not None:
                await cancel_and_wait(task)
        queue.driver = queue.watcher = None

    async def _watch(self, queue: RoomQueue, activity: ActivityFeed) -> None:
        version = activity.version
        while True:
            await activity.wait_for_change(version)
            version = activity.version
            queue.changed.set()

    async def _drive(self, queue: RoomQueue) -> None:
        while True:
            queue.changed.clear()
            try:
                await self._step(queue)
            except Exception:  # keep the room's driver alive; the items stay in the outbox
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # an error raised while the driver was being stopped: stop
                log.exception("delivery driver error in room %s", queue.room_id)
                # Try again on the next change, or soon: a store that was briefly away
                # (a Redis restart) must not leave a quiet call's results waiting forever.
                await self._wait(queue, self.retry_delay)

    async def _step(self, queue: RoomQueue) -> None:
        await self._expire(queue)
        activity = queue.activity
        if activity is None or not queue.items or self.handing_over:
            await queue.changed.wait()
            return
        queue.prepare_all()  # pre-render speech while the items wait
        now = self.clock.now()
        retry_at = [t for t in queue.not_before.values() if t > now]
        ready = [
            item for key, (_, item) in queue.items.items() if queue.not_before.get(key, now) <= now
        ]
        action = decide(activity.snapshot(), ready, now)
        if isinstance(action, Deliver):
            await self._attempt(queue, action.items)
            return
        # Wake for the policy's time, the next retry, or the next expiry, if any.
        wake = min([action.time if isinstance(action, WakeAt) else math.inf, *retry_at])
        for record, _ in queue.items.values():
            left = self.outbox.seconds_left(record)
            wake = wake if left is None else min(wake, now + left)
        if wake == math.inf:
            await queue.changed.wait()
        else:
            await self._wait(queue, wake - now)

    async def _wait(self, queue: RoomQueue, seconds: float) -> None:
        """Sleep `seconds` on the hub clock, or less if something changes."""
        await wait_or_sleep(self.clock, queue.changed, seconds)

    async def _expire(self, queue: RoomQueue) -> None:
        for delivery_id, (record, item) in list(queue.items.items()):
            if self.outbox.expired(record):
                queue.forget(delivery_id)
                record = await self.outbox.set_status(record, DeliveryStatus.EXPIRED, error=_TTL)
                await self._after(record, "expired", item.strategy)

    async def _attempt(self, queue: RoomQueue, items: tuple[PendingItem, ...]) -> None:
        injector, activity = queue.injector, queue.activity
        assert injector is not None and activity is not None
        strategy = items[0].strategy
        live: list[DeliveryRecord] = []
        texts: dict[str, str] = {}
        hooked = False
        for item in items:
            record = queue.items[queue_id(item)][0]
            if not self.hub.hooks.has(HookTrigger.BEFORE_DELIVER, record.room_id):
                live.append(record)  # no hook: no event to build
                texts[record.id] = record.content
                continue
            # A BEFORE_DELIVER hook that raises is logged and skipped by the hook registry
            # (fail open): a broken filter must not lose a result. To stop a result, block it.
            hooked = True
            outcome = await self.hub.run_hooks(
                HookTrigger.BEFORE_DELIVER, delivery_event(record, strategy)
            )
            if outcome.blocked:
                queue.forget(record.id)
                error = f"blocked by hook {outcome.blocked_by}: {outcome.reason}"
                failed = await self.outbox.set_status(
                    record, DeliveryStatus.FAILED, attempted=True, error=error
                )
                await self._after(failed, "failed", strategy, error)
                continue
            live.append(record)
            texts[record.id] = outcome.event.text
        # Hooks may take time: if the caller started talking meanwhile, decide again later
        # (with no live item left, decide() never says Deliver). Without a hook nothing ran
        # since the decision.
        if hooked:
            live_items = [queue.items[record.id][1] for record in live]
            if not isinstance(decide(activity.snapshot(), live_items, self.clock.now()), Deliver):
                return
        if self.handing_over:  # began while the hooks ran: the next instance speaks them
            return
        claimed: list[DeliveryRecord] = []
        for record in live:  # the lease: no other instance speaks these meanwhile
            fresh, won = await self.outbox.claim(record)
            if not won and await self._may_break(fresh):
                log.info("delivery %s: taking over the lease of %s", fresh.id, fresh.lease_owner)
                fresh, won = await self.outbox.claim(fresh, breaking=fresh.lease_owner)
            if won:
                claimed.append(fresh)
                queue.update(fresh)  # a cancelled injection leaves them `delivering`, never lost
            else:
                self._defer(queue, fresh)
        if not claimed:
            return
        name, text = strategy_name(strategy), "\n\n".join(texts[r.id] for r in claimed)
        ids = [r.id for r in claimed]
        metadata = {**claimed[0].metadata, "delivery_ids": ids, "strategy": name}
        if any(queue.interruptions[i] >= OFFER_AFTER for i in ids):
            metadata["offer"] = True  # cut off again and again: ask before reading it
        async with self.outbox.leases(claimed, self.clock):
            try:
                result = await injector.inject(
                    text, allow_interrupt=name == "immediate", metadata=metadata
                )
                error = "" if result in _OUTCOMES else f"injector returned {result!r}"
            except Exception as exc:
                log.exception("injection failed in room %s", queue.room_id)
                result, error = None, f"{type(exc).__name__}: {exc}"
        await self._settle(queue, claimed, None if error else result, error, strategy)

    async def _may_break(self, record: DeliveryRecord) -> bool:
        breaker = self.lease_breaker
        return (
            breaker is not None
            and not record.status.final
            and self.outbox.leased_elsewhere(record)
            and await breaker(record)
        )

    async def _settle(
        self,
        queue: RoomQueue,
        records: list[DeliveryRecord],
        result: InjectOutcome | None,
        error: str,
        strategy: DeliveryStrategy,
    ) -> None:
        """Persist the outcome of one injection for every item in it, then run the hooks
        (so a hook that fails or is cancelled cannot leave a spoken item queued)."""
        settled: list[tuple[DeliveryRecord, str, str]] = []
        for record in records:
            if result is InjectOutcome.FINISHED:
                done = await self.outbox.settle(record, DeliveryStatus.DELIVERED, self.clock)
                queue.forget(record.id)
                settled.append((done, "delivered", ""))
                continue
            if result is not None:  # the caller's turn, not a fault: never uses it up
                settled.append(await self._spare(queue, record, result))
                continue
            if record.attempts - queue.spared[record.id] >= record.max_attempts:
                failed = await self.outbox.settle(
                    record,
                    DeliveryStatus.FAILED,
                    self.clock,
                    error=error or f"failed on each of {record.attempts} attempts",
                )
                queue.forget(record.id)
                settled.append((failed, "failed", failed.error))
                continue
            delay = self.retry_delay * 2 ** max(0, record.attempts - 1)
            queue.not_before[record.id] = self.clock.now() + delay
            requeued = await self.outbox.settle(
                record, DeliveryStatus.PENDING, self.clock, error=error
            )
            queue.update(requeued)
            settled.append((requeued, "failed", error))
        for record, outcome, reason in settled:
            await self._after(record, outcome, strategy, reason)

    async def _spare(
        self, queue: RoomQueue, record: DeliveryRecord, result: InjectOutcome
    ) -> tuple[DeliveryRecord, str, str]:
        """Requeue a result the caller cut (interrupted), held at the last check (deferred)
        or did not want now (declined: held until the next call). The attempt is spared."""
        queue.spared[record.id] += 1
        if result is InjectOutcome.DECLINED:
            held = await self.outbox.settle(record, DeliveryStatus.HELD, self.clock)
            queue.forget(record.id)  # held: the next session picks it up again
            return held, "declined", ""
        if result is InjectOutcome.INTERRUPTED:
            queue.interruptions[record.id] += 1
            status = DeliveryStatus.INTERRUPTED
        else:
            status = DeliveryStatus.PENDING
        requeued = await self.outbox.settle(record, status, self.clock)
        queue.update(requeued)
        return requeued, str(result), ""

    async def _after(
        self, record: DeliveryRecord, outcome: str, strategy: DeliveryStrategy, error: str = ""
    ) -> None:
        if not self.hub.hooks.has(HookTrigger.AFTER_DELIVER, record.room_id):
            return  # no hook: no event to build
        final, attempt = record.status.final, record.attempts
        event = delivery_event(
            record, strategy, outcome=outcome, error=error or None, attempt=attempt, final=final
        )
        try:
            await self.hub.run_hooks(HookTrigger.AFTER_DELIVER, event)
        except Exception:  # an observer must not undo a delivery nor stop the driver
            log.exception("AFTER_DELIVER hook failed for delivery %s", record.id)
