"""A Redis store through Sentinel across a real fail-over: the primary SIGKILLed (by its PID),
a replica promoted by the Sentinel, and the store's writes going on against the new primary;
every write the replicas had before the kill and every one acknowledged during and after is
there once, a delivery in flight ends once. With `wait_replicas` a write counts as done only
once a replica has it; without it a replica is behind by whatever it had not yet copied
(docs/operations.md says what to run)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from tests.support.waiting import until
from voicehub.core.clock import SystemClock
from voicehub.core.events import Event
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.outage import retry_unavailable
from voicehub.core.store.redis import RedisStore
from voicehub.errors import StoreUnavailableError
from voicehub_dev.fakes.redis_sentinel import SentinelSet, running_sentinel_set
from voicehub_dev.fakes.redis_server import unique_prefix

# Each test starts its own primary, replicas and Sentinel (real processes), and the fail-over
# runs on the Sentinel's own timers: seconds each. `make test` runs them; `make check` does not.
pytestmark = pytest.mark.slow

ROOM = "desk:caller"
T = TypeVar("T")
OUTAGE_LIMIT = 30.0  # as the hub's STORE_OUTAGE_SECONDS


@pytest.fixture
def two_replicas() -> Iterator[SentinelSet]:
    # Two replicas: once one is promoted, the other follows it, so that writes waiting for
    # one replica (wait_replicas=1) go on.
    with running_sentinel_set(replicas=2) as redis_set:
        yield redis_set


async def stored(write: Callable[[], Awaitable[T]], what: str) -> T:
    """`write()` as the hub does it: retried while the store is unavailable."""
    try:
        return await write()
    except StoreUnavailableError as exc:
        return await retry_unavailable(SystemClock(), write, exc, what=what, limit=OUTAGE_LIMIT)


async def test_writes_go_on_through_a_fail_over_and_none_acknowledged_is_lost_or_doubled(
    two_replicas: SentinelSet,
) -> None:
    redis_set = two_replicas
    store = RedisStore(f"{redis_set.url}?wait_replicas=1", prefix=unique_prefix())
    try:
        # a result being spoken: claimed (fence 1) by the instance speaking it
        result = DeliveryRecord(id="d1", room_id=ROOM, content="heat pumps", created_at=1.0)
        assert await store.put_delivery(result)
        claimed = result.model_copy(
            update={"status": DeliveryStatus.DELIVERING, "fence": 1, "lease_owner": "a"}
        )
        assert await store.swap_delivery(claimed, expected_fence=0)

        acknowledged: list[int] = []

        async def append(seq: int) -> None:
            event = Event(room_id=ROOM, seq=seq, text=f"caller said #{seq}")
            await stored(lambda: store.append_event(event), f"event {seq}")
            acknowledged.append(seq)

        for seq in range(1, 11):
            await append(seq)

        # wait_replicas=1 puts each write on one replica, not on both, and the Sentinel
        # promotes the replica it last saw furthest along, a view up to a second old: a write
        # one replica lacks can be lost when the fail-over follows it at once (what
        # operations.md says). With both replicas caught up, what is left is what voicehub
        # does: the outcome retried onto the new primary, once, the stale fence refused.
        redis_set.sync_replicas()
        redis_set.kill_primary()

        # the result's outcome, written as the fault hits: retried until it lands
        spoken = claimed.model_copy(update={"status": DeliveryStatus.DELIVERED})

        async def finish() -> bool:
            return await store.swap_delivery(spoken, expected_fence=1)

        finished = await stored(finish, "the result's outcome")
        if not finished:  # it landed, but its answer was lost: the stored record is ours
            assert await store.get_delivery("d1") == spoken
        replicas = {replica.port for replica in redis_set.replicas}
        promoted = await until(
            lambda: redis_set.primary_port() in replicas, what="a replica promoted", poll=0.05
        )
        assert promoted

        for seq in range(11, 21):  # the caller goes on talking: on the new primary
            await append(seq)

        events = await store.list_events(ROOM)
        assert [e.seq for e in events] == acknowledged == list(range(1, 21))
        assert await store.get_delivery("d1") == spoken
        # the instance that lost the speaking, with the fence it had: refused
        stale = claimed.model_copy(update={"status": DeliveryStatus.PENDING, "fence": 2})
        assert not await store.swap_delivery(stale, expected_fence=0)
        assert await store.list_deliveries(statuses=[DeliveryStatus.DELIVERED]) == [spoken]
    finally:
        await store.close()


async def test_a_write_no_replica_has_is_not_acknowledged_with_wait_replicas() -> None:
    with running_sentinel_set(replicas=1) as redis_set:
        store = RedisStore(f"{redis_set.url}?wait_replicas=1", prefix=unique_prefix())
        try:
            assert await store.check_durability() == []  # AOF on, and writes wait
            await store.append_event(Event(room_id=ROOM, seq=1, text="heard"))
            redis_set.replica.stop()
            event = Event(room_id=ROOM, seq=2, text="on the primary only")
            with pytest.raises(StoreUnavailableError, match="reached 0 of the 1 replicas") as no:
                await store.append_event(event)
            assert "wait_replicas" in str(no.value)
            redis_set.replica.start()  # the same directory: it syncs again
            await stored(lambda: store.append_event(event), "event 2")  # sent again: stored once
            assert [e.seq for e in await store.list_events(ROOM)] == [1, 2]
        finally:
            await store.close()


async def test_without_wait_replicas_a_write_goes_on_with_its_replica_down() -> None:
    """The default: a write is acknowledged by the primary alone (so a replica behind it can
    lose it in a fail-over, which is what `wait_replicas` is for)."""
    with running_sentinel_set(replicas=1) as redis_set:
        store = RedisStore(redis_set.url, prefix=unique_prefix())
        try:
            [warning] = await store.check_durability()  # said at start
            assert "a fail-over can lose the last results" in warning
            assert "wait_replicas=1" in warning
            redis_set.replica.stop()
            await store.append_event(Event(room_id=ROOM, seq=1, text="on the primary only"))
            assert [e.seq for e in await store.list_events(ROOM)] == [1]
        finally:
            await store.close()
