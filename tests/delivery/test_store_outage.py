"""A store that is briefly unreachable (a Redis restart) while a room has a result: nothing
is lost and nothing is spoken twice. The claim that fails is tried again soon even in a quiet
call (no activity change to wake the driver), and the outcome of a finished speech is
written once the store is back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.policy import Immediate
from voicehub.delivery.service import PUT_RETRY_SECONDS
from voicehub.errors import StoreError
from voicehub.hub import Hub, HubInstance
from voicehub_dev.fakes.scripted_session import FakeSession


class OutageStore(MemoryStore):
    """Raises StoreError on the next `failures` delivery swaps whose status is `when`."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.when = DeliveryStatus.DELIVERING
        self.refused = 0

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        if self.failures and delivery.status is self.when:
            self.failures -= 1
            self.refused += 1
            raise StoreError("Redis store redis://x failed: ConnectionError: refused")
        return await super().swap_delivery(delivery, expected_fence=expected_fence)


@pytest.fixture
async def setup() -> AsyncIterator[tuple[Hub, OutageStore, VirtualClock, FakeSession]]:
    clock, store = VirtualClock(), OutageStore()
    hub = Hub(
        store=store,
        clock=clock,
        delivery_strategy=Immediate(),
        instance=HubInstance(wall=clock.now),
    )
    await hub.start()
    session = FakeSession(clock, speech_seconds=2.0)
    await hub.delivery.attach("call", session, session.activity)
    yield hub, store, clock, session
    await hub.aclose()


async def test_a_claim_refused_by_the_store_is_tried_again_in_a_quiet_call(
    setup: tuple[Hub, OutageStore, VirtualClock, FakeSession],
) -> None:
    hub, store, clock, session = setup
    store.failures = 2  # the store is away for the first two claims
    delivery_id = await hub.deliver("call", "the answer")
    await clock.advance(0)
    assert store.refused == 1 and session.texts == []
    for _ in range(10):
        await clock.advance(1.0)
    assert store.refused == 2 and session.injections_per_id() == {delivery_id: 1}
    record = await store.get_delivery(delivery_id)
    assert record is not None and record.status is DeliveryStatus.DELIVERED


async def test_a_spoken_result_is_recorded_delivered_once_the_store_is_back(
    setup: tuple[Hub, OutageStore, VirtualClock, FakeSession],
) -> None:
    hub, store, clock, session = setup
    store.when, store.failures = DeliveryStatus.DELIVERED, 3  # away when the speech ends
    delivery_id = await hub.deliver("call", "the answer")
    for _ in range(20):
        await clock.advance(0.5)
    assert store.refused == 3
    record = await store.get_delivery(delivery_id)
    assert record is not None and (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert session.injections_per_id() == {delivery_id: 1}  # not spoken again


class RenewalOutageStore(MemoryStore):
    """Raises StoreError on the next `failures` lease renewals (a swap of a record that is
    already being spoken), as a Redis restart does mid-speech."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.refused = 0

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        stored = await self.get_delivery(delivery.id)
        renewal = (
            stored is not None
            and stored.status is DeliveryStatus.DELIVERING
            and delivery.status is DeliveryStatus.DELIVERING
        )
        if self.failures and renewal:
            self.failures -= 1
            self.refused += 1
            raise StoreError("Redis store redis://x failed: ConnectionError: Connection closed")
        return await super().swap_delivery(delivery, expected_fence=expected_fence)


async def test_a_lease_renewal_refused_mid_speech_neither_repeats_nor_drops_the_result() -> None:
    # The speech outlasts several renewals; the first one meets the store away. The lease
    # must be renewed again once the store is back, and the outcome written once: the
    # renewal's error once escaped the lease's context, so the driver took the finished
    # speech for a failed one and spoke it again (delivered with attempts 2).
    clock, store = VirtualClock(), RenewalOutageStore()
    hub = Hub(
        store=store,
        clock=clock,
        delivery_strategy=Immediate(),
        instance=HubInstance(wall=clock.now, delivery_lease=3),
    )
    await hub.start()
    session = FakeSession(clock, speech_seconds=10.0)
    await hub.delivery.attach("call", session, session.activity)
    store.failures = 1
    try:
        delivery_id = await hub.deliver("call", "the answer")
        leases: list[float] = []
        for _ in range(30):
            await clock.advance(0.5)
            record = await store.get_delivery(delivery_id)
            assert record is not None
            if record.status is DeliveryStatus.DELIVERING:
                assert record.lease_until is not None and record.lease_until > clock.now()
                leases.append(record.lease_until)
        assert store.refused == 1
        assert len(set(leases)) > 2  # renewed after the refusal too
        record = await store.get_delivery(delivery_id)
        assert record is not None
        assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)
        assert session.injections_per_id() == {delivery_id: 1}
    finally:
        await hub.aclose()


class PutOutageStore(MemoryStore):
    """Writes the first `landed` new deliveries but answers with StoreError (an answer lost
    in a restart), then refuses `failures` more puts outright."""

    def __init__(self, failures: int, landed: int = 0) -> None:
        super().__init__()
        self.failures, self.landed, self.tries = failures, landed, 0

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        self.tries += 1
        if self.landed:
            self.landed -= 1
            await super().put_delivery(delivery)
            raise StoreError("Redis store redis://x failed: ConnectionError: reset")
        if self.failures:
            self.failures -= 1
            raise StoreError("Redis store redis://x failed: ConnectionError: refused")
        return await super().put_delivery(delivery)


async def test_a_result_finished_while_the_store_is_away_is_kept_and_stored_once() -> None:
    clock, store = VirtualClock(), PutOutageStore(failures=3, landed=1)
    hub = Hub(store=store, clock=clock, delivery_strategy=Immediate())
    await hub.start()
    try:
        delivering = asyncio.ensure_future(hub.deliver("call", "the answer"))
        await clock.advance(5)
        delivery_id = await delivering
        assert store.tries == 5
        stored = await store.list_deliveries(room_id="call")
        assert [d.id for d in stored] == [delivery_id]  # the landed write, found by its id
    finally:
        await hub.aclose()


async def test_a_store_away_longer_than_the_retry_gives_the_error() -> None:
    clock, store = VirtualClock(), PutOutageStore(failures=10**6)
    hub = Hub(store=store, clock=clock, delivery_strategy=Immediate())
    await hub.start()
    try:
        delivering = asyncio.ensure_future(hub.deliver("call", "the answer"))
        await clock.advance(PUT_RETRY_SECONDS + 2)
        with pytest.raises(StoreError):
            await delivering
    finally:
        await hub.aclose()
