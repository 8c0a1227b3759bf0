"""The outbox on both stores: statuses, idempotent add, time to live, attempts, order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from voicehub.core.store.base import DeliveryStatus, Store
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.outbox import UNFINISHED, Outbox
from voicehub.delivery.policy import Immediate, Queued, WaitForIdle, strategy_from_json


class Wall:
    """A settable epoch clock."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time


def sqlite_store(path: Path) -> Store:
    from voicehub.core.store.sqlite import SQLiteStore

    return SQLiteStore(path)


@pytest.fixture(params=["memory", "sqlite"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Opens the store under test; for SQLite each call opens the same file again."""
    if request.param == "memory":
        shared = MemoryStore()
        return lambda: shared
    return lambda: sqlite_store(tmp_path / "outbox.db")


@pytest.fixture
async def store(open_store: Callable[[], Store]) -> AsyncIterator[Store]:
    opened = open_store()
    yield opened
    await opened.close()


async def test_add_persists_a_pending_record(store: Store) -> None:
    wall = Wall(1_000.0)
    outbox = Outbox(store, ttl=60.0, max_attempts=4, wall=wall)
    record, new = await outbox.add(
        "room", "result", WaitForIdle(2.0, max_wait=9.0), arrived_at=5.0, metadata={"task": "t"}
    )
    assert new
    assert record.id.startswith("dlv-")
    stored = await store.get_delivery(record.id)
    assert stored == record
    assert (stored.status, stored.attempts, stored.max_attempts) == (DeliveryStatus.PENDING, 0, 4)
    assert (stored.created_at, stored.expires_at, stored.arrived_at) == (1_000.0, 1_060.0, 5.0)
    assert strategy_from_json(stored.strategy) == WaitForIdle(2.0, max_wait=9.0)
    assert stored.metadata == {"task": "t"}


async def test_add_is_idempotent_by_delivery_id(store: Store) -> None:
    outbox = Outbox(store, wall=Wall())
    first, new = await outbox.add("room", "first", Immediate(), arrived_at=0.0, delivery_id="x")
    again, new_again = await outbox.add(
        "other-room", "second", Queued(), arrived_at=1.0, delivery_id="x"
    )
    assert (new, new_again) == (True, False)
    assert again == first  # the stored record, untouched
    assert [(r.id, r.content) for r in await store.list_deliveries()] == [("x", "first")]


async def test_add_after_the_record_finished_does_not_revive_it(store: Store) -> None:
    outbox = Outbox(store, wall=Wall())
    record, _ = await outbox.add("room", "result", Immediate(), arrived_at=0.0, delivery_id="x")
    await outbox.set_status(record, DeliveryStatus.DELIVERED)
    again, new = await outbox.add("room", "result", Immediate(), arrived_at=9.0, delivery_id="x")
    assert not new
    assert again.status is DeliveryStatus.DELIVERED
    assert await outbox.unfinished() == []


async def test_set_status_counts_attempts_and_keeps_the_error(store: Store) -> None:
    wall = Wall(100.0)
    outbox = Outbox(store, wall=wall)
    record, _ = await outbox.add("room", "result", Immediate(), arrived_at=0.0)
    wall.time = 105.0
    delivering = await outbox.set_status(record, DeliveryStatus.DELIVERING, attempted=True)
    failed = await outbox.set_status(delivering, DeliveryStatus.PENDING, error="TTS down")
    stored = await store.get_delivery(record.id)
    assert stored == failed
    assert (stored.status, stored.attempts, stored.error) == (DeliveryStatus.PENDING, 1, "TTS down")
    assert stored.updated_at == 105.0
    cleared = await outbox.set_status(stored, DeliveryStatus.DELIVERED)
    assert (cleared.attempts, cleared.error) == (1, "")


async def test_time_to_live_follows_the_injected_wall_clock(store: Store) -> None:
    wall = Wall(0.0)
    outbox = Outbox(store, ttl=10.0, wall=wall)
    record, _ = await outbox.add("room", "result", Immediate(), arrived_at=0.0)
    wall.time = 9.5
    assert not outbox.expired(record)
    assert outbox.seconds_left(record) == pytest.approx(0.5)
    wall.time = 10.0
    assert outbox.expired(record)
    assert outbox.seconds_left(record) == 0.0


async def test_no_time_to_live_never_expires(store: Store) -> None:
    wall = Wall(0.0)
    outbox = Outbox(store, ttl=None, wall=wall)
    record, _ = await outbox.add("room", "result", Immediate(), arrived_at=0.0)
    wall.time = 1e12
    assert record.expires_at is None
    assert not outbox.expired(record)
    assert outbox.seconds_left(record) is None


async def test_unfinished_lists_what_a_restart_must_pick_up(store: Store) -> None:
    outbox = Outbox(store, wall=Wall())
    for status in DeliveryStatus:
        record, _ = await outbox.add(
            "room" if status != DeliveryStatus.HELD else "other",
            status.value,
            Immediate(),
            arrived_at=0.0,
            delivery_id=status.value,
        )
        await outbox.set_status(record, status)
    assert {r.id for r in await outbox.unfinished()} == {s.value for s in UNFINISHED}
    assert {s.value for s in UNFINISHED} == {"pending", "delivering", "interrupted", "held"}
    assert [r.id for r in await outbox.unfinished("other")] == ["held"]


async def test_records_stamped_at_the_same_instant_keep_their_arrival_order(
    store: Store,
) -> None:
    outbox = Outbox(store, wall=Wall(50.0))  # a frozen (or coarse) wall clock
    ids = ["zz", "aa", "mm"]
    for delivery_id in ids:
        await outbox.add("room", delivery_id, Immediate(), arrived_at=0.0, delivery_id=delivery_id)
    assert [r.id for r in await outbox.unfinished("room")] == ids


async def test_records_survive_reopening_the_store(open_store: Callable[[], Store]) -> None:
    first = open_store()
    outbox = Outbox(first, wall=Wall())
    record, _ = await outbox.add("room", "result", Queued(3.0), arrived_at=0.0, delivery_id="d")
    await outbox.set_status(record, DeliveryStatus.HELD)
    await first.close()
    reopened = open_store()
    try:
        (held,) = await Outbox(reopened, wall=Wall()).unfinished()
        assert (held.id, held.status, held.content) == ("d", DeliveryStatus.HELD, "result")
        assert strategy_from_json(held.strategy) == Queued(3.0)
    finally:
        await reopened.close()


def test_max_attempts_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="max_attempts must be at least 1"):
        Outbox(MemoryStore(), max_attempts=0)
