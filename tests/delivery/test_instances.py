"""Several instances on one Redis: each result is spoken once, by whichever instance holds the
call. Two hubs in one process stand for two instances (their own connections, owners and
delivery services, one key prefix). Leases run on the injected wall clock (`clock.now`).

The virtual clock settles the event loop but not socket I/O, so these tests wait for the
outcome they expect (polling the store between turns of the loop) rather than for a time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.support.waiting import until
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.redis import RedisStore
from voicehub.delivery.announcements import follow_announcements
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import Immediate
from voicehub.delivery.service import DeliveryService
from voicehub.hub import Hub
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix
from voicehub_dev.fakes.scripted_session import FakeSession

__all__ = ["redis_server"]

Condition = Callable[[], Awaitable[bool]]


async def advance_until(clock: VirtualClock, condition: Condition, *, limit: float) -> None:
    """Advance virtual time a second at a time, letting I/O finish, until `condition`
    (false after `limit` seconds of clock time fails)."""
    await until(condition, clock=clock, step=1.0, virtual_limit=limit, poll=0.05)


class Instance:
    def __init__(self, hub: Hub, store: RedisStore) -> None:
        self.hub, self.store = hub, store
        self.follower: asyncio.Task[None] | None = None


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=1000.0)


@pytest.fixture
async def instances(
    redis_server: RedisServer, clock: VirtualClock
) -> AsyncIterator[tuple[Instance, Instance]]:
    prefix = unique_prefix()
    made: list[Instance] = []
    for name in ("a", "b"):
        store = RedisStore(redis_server.url, prefix=prefix)
        hub = Hub(clock=clock, store=store)
        hub.delivery = DeliveryService(
            hub, default_strategy=Immediate(), wall=clock.now, owner=name
        )
        await hub.start()
        instance = Instance(hub, store)
        instance.follower = asyncio.create_task(follow_announcements(hub.delivery, store, clock))
        made.append(instance)

    async def subscribed() -> bool:
        counts = await made[0].store.redis.pubsub_numsub(made[0].store.channel)
        return bool(counts) and counts[0][1] == 2

    await until(subscribed, poll=0)
    yield made[0], made[1]
    for instance in made:
        assert instance.follower is not None
        instance.follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await instance.follower
        await instance.hub.aclose()


def status_is(store: RedisStore, delivery_id: str, status: DeliveryStatus) -> Condition:
    async def check() -> bool:
        record = await store.get_delivery(delivery_id)
        return record is not None and record.status is status

    return check


async def attach(instance: Instance, room_id: str, session: FakeSession) -> None:
    await instance.hub.delivery.attach(room_id, session, session.activity)


async def test_a_result_finished_on_a_reaches_the_call_live_on_b_at_once(
    instances: tuple[Instance, Instance], clock: VirtualClock
) -> None:
    a, b = instances
    on_b = FakeSession(clock)
    await attach(b, "call-1", on_b)
    delivery_id = await a.hub.deliver("call-1", "the answer", delivery_id="d1")

    # No time passes: the announcement, not a poll, brings it to B.
    async def spoken() -> bool:
        return on_b.texts == ["the answer"]

    await until(spoken, poll=0)
    await advance_until(clock, status_is(a.store, delivery_id, DeliveryStatus.DELIVERED), limit=30)
    record = await a.store.get_delivery(delivery_id)
    assert record is not None and (record.attempts, record.lease_owner) == (1, "")
    assert on_b.injections_per_id() == {"d1": 1}


async def test_a_held_result_is_spoken_by_the_instance_the_caller_calls_back_to(
    instances: tuple[Instance, Instance], clock: VirtualClock
) -> None:
    a, b = instances
    first = FakeSession(clock)
    await attach(a, "call-1", first)
    await a.hub.delivery.detach("call-1")  # the caller hung up on A
    delivery_id = await a.hub.deliver("call-1", "the answer", delivery_id="d1")
    await until(status_is(a.store, delivery_id, DeliveryStatus.HELD), poll=0)

    again = FakeSession(clock)
    await attach(b, "call-1", again)  # ... and called back through B
    await advance_until(clock, status_is(b.store, delivery_id, DeliveryStatus.DELIVERED), limit=30)
    assert first.texts == [] and again.injections_per_id() == {"d1": 1}


async def test_two_instances_racing_for_one_held_item_speak_it_once(
    instances: tuple[Instance, Instance], clock: VirtualClock
) -> None:
    a, b = instances
    delivery_id = await a.hub.deliver("call-1", "the answer", delivery_id="d1")
    await until(status_is(a.store, delivery_id, DeliveryStatus.HELD), poll=0)
    on_a, on_b = FakeSession(clock), FakeSession(clock)
    # Forced: both believe they hold the call and start driving it at the same moment.
    await asyncio.gather(attach(a, "call-1", on_a), attach(b, "call-1", on_b))

    await advance_until(clock, status_is(a.store, delivery_id, DeliveryStatus.DELIVERED), limit=30)
    for _ in range(60):  # a minute more: the loser's retry finds the item delivered
        await clock.advance(1.0)
    assert on_a.injections_per_id() + on_b.injections_per_id() == {"d1": 1}
    record = await a.store.get_delivery(delivery_id)
    assert record is not None and record.attempts == 1


class HangingSession(FakeSession):
    """Starts speaking and never finishes; remembers the driver so a test can kill it."""

    driver: asyncio.Task[Any] | None = None

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        self.driver = asyncio.current_task()
        return await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)


async def test_a_lease_left_by_a_killed_instance_expires_and_b_speaks_it_once(
    instances: tuple[Instance, Instance], clock: VirtualClock
) -> None:
    a, b = instances
    hanging = HangingSession(clock, speech_seconds=1e9)
    await attach(a, "call-1", hanging)
    delivery_id = await a.hub.deliver("call-1", "the answer", delivery_id="d1")
    await until(status_is(a.store, delivery_id, DeliveryStatus.DELIVERING), poll=0)

    async def speaking_on_a() -> bool:  # the claim is stored a few awaits before inject
        return hanging.driver is not None

    await until(speaking_on_a, poll=0)
    lease = a.hub.delivery.outbox.lease
    assert hanging.driver is not None
    hanging.driver.cancel()  # A dies mid-speech: no cleanup, the lease stays behind
    await clock.advance(0)
    killed_at = clock.now()

    on_b = FakeSession(clock)
    await attach(b, "call-1", on_b)  # the caller reconnects through B at once

    async def spoken_on_b() -> bool:
        return bool(on_b.texts)

    await advance_until(clock, spoken_on_b, limit=2 * lease)
    assert on_b.injections[0].started >= killed_at + lease - 1e-6  # not before the lease ran out
    await advance_until(clock, status_is(b.store, delivery_id, DeliveryStatus.DELIVERED), limit=30)
    record = await b.store.get_delivery(delivery_id)
    assert record is not None and record.attempts == 2  # A's interrupted attempt counts
    assert hanging.texts == ["the answer"] and on_b.injections_per_id() == {"d1": 1}
