"""Follow-ups of results nobody collected: the pure decision by table, and the driver on a
real SQLite file with recording channels (retries with backoff, refusals, recovery of a
sender that stopped mid-send, "none"), on a virtual wall clock."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.followup import (
    TTL_ERROR,
    Claim,
    FollowUpPlan,
    Skip,
    WakeAt,
    decide,
    followup_state,
)
from voicehub.delivery.followup_service import FollowUpError, FollowUps
from voicehub.delivery.service import DeliveryService
from voicehub.hub import Hub, HubInstance

HOUR = 3600.0
PLAN = FollowUpPlan(hold_for=24 * HOUR, channel="sms")


def record(**fields: object) -> DeliveryRecord:
    values: dict[str, object] = {
        "id": "dlv-1",
        "room_id": "research:tel-1",
        "content": "Heat pumps move heat.",
        "status": DeliveryStatus.HELD,
        "created_at": 1000.0,
    }
    values.update(fields)
    return DeliveryRecord.model_validate(values)


@pytest.mark.parametrize(
    ("fields", "now", "expected"),
    [
        ({}, 1000.0 + 24 * HOUR - 1, WakeAt(1000.0 + 24 * HOUR)),
        ({}, 1000.0 + 24 * HOUR, Claim()),
        ({"status": DeliveryStatus.PENDING}, 1e9, Skip()),  # live in a call
        ({"status": DeliveryStatus.DELIVERED}, 1e9, Skip()),
        ({"status": DeliveryStatus.EXPIRED, "error": TTL_ERROR}, 1e9, Claim()),
        ({"status": DeliveryStatus.EXPIRED, "error": "blocked"}, 1e9, Skip()),
        ({"metadata": {"kind": "call_notice"}}, 1e9, Skip()),
        ({"room_id": "research:tel-1::task-1"}, 1e9, Skip()),
        ({"metadata": {"followup": {"state": "sent"}}}, 1e9, Skip()),
        ({"metadata": {"followup": {"state": "refused"}}}, 1e9, Skip()),
        ({"metadata": {"followup": {"state": "sending", "until": 2e9}}}, 1e9, WakeAt(2e9)),
        ({"metadata": {"followup": {"state": "sending", "until": 5.0}}}, 1e9, Claim(True)),
        ({"metadata": {"followup": {"state": "retry", "next_at": 2e9}}}, 1e9, WakeAt(2e9)),
        ({"metadata": {"followup": {"state": "retry", "next_at": 5.0}}}, 1e9, Claim()),
    ],
)
def test_what_a_result_needs(fields: dict[str, object], now: float, expected: object) -> None:
    assert decide(record(**fields), PLAN, now) == expected


class Channel:
    """A recording channel: answers from `results` (an exception or a reference) in turn."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []
        self.results: deque[str | FollowUpError] = deque()

    async def send(self, record: DeliveryRecord, *, recover: bool) -> str:
        self.sent.append((record.id, recover))
        result = self.results.popleft() if self.results else f"ref-{len(self.sent)}"
        if isinstance(result, FollowUpError):
            raise result
        return result


class World:
    def __init__(self, store: SQLiteStore) -> None:
        self.store, self.clock, self.now = store, VirtualClock(), 10_000.0
        self.sms = Channel()

    def wall(self) -> float:
        return self.now

    def followups(self, owner: str = "a", channel: str = "sms") -> FollowUps:
        return FollowUps(
            self.store,
            plans={"research": FollowUpPlan(HOUR, channel)},  # type: ignore[arg-type]
            senders={"sms": self.sms},
            clock=self.clock,
            wall=self.wall,
            owner=owner,
            lease=60.0,
            backoff=30.0,
            max_attempts=3,
        )

    async def held(self, delivery_id: str = "dlv-1", **fields: object) -> DeliveryRecord:
        item = record(id=delivery_id, created_at=self.now, **fields)
        await self.store.put_delivery(item)
        return item

    async def get(self, delivery_id: str = "dlv-1") -> DeliveryRecord:
        found = await self.store.get_delivery(delivery_id)
        assert found is not None
        return found


@pytest_asyncio.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    store = SQLiteStore(tmp_path / "voicehub.db")
    yield World(store)
    await store.close()


async def test_a_held_result_goes_out_once_after_hold_for(world: World) -> None:
    await world.held()
    followups = world.followups()
    assert await followups.sweep() == world.now + HOUR  # not yet: when to look again
    assert world.sms.sent == []
    world.now += HOUR
    await followups.sweep()
    await world.followups(owner="b").sweep()  # another instance, afterwards: nothing to do
    assert world.sms.sent == [("dlv-1", False)]
    done = await world.get()
    assert done.status is DeliveryStatus.DELIVERED and done.lease_owner == ""
    state = followup_state(done)
    assert (state["state"], state["channel"], state["reference"]) == ("sent", "sms", "ref-1")


async def test_passing_failures_back_off_then_give_up_leaving_it_held(world: World) -> None:
    await world.held()
    world.sms.results.extend([FollowUpError("503"), FollowUpError("503"), FollowUpError("503")])
    followups = world.followups()
    world.now += HOUR
    await followups.sweep()
    state = followup_state(await world.get())
    assert (state["state"], state["next_at"], state["error"]) == ("retry", world.now + 30, "503")
    assert (await world.get()).status is DeliveryStatus.HELD  # a call-in would hear it
    assert await followups.sweep() == world.now + 30  # waits for the backoff
    world.now += 30
    await followups.sweep()
    assert followup_state(await world.get())["next_at"] == world.now + 60  # doubled
    world.now += 60
    await followups.sweep()
    done = await world.get()
    assert len(world.sms.sent) == 3 and followup_state(done)["state"] == "gave_up"
    assert done.status is DeliveryStatus.HELD
    world.now += 10 * HOUR
    await followups.sweep()
    assert len(world.sms.sent) == 3


async def test_a_refusal_is_final_and_the_result_stays_held(world: World) -> None:
    await world.held()
    world.sms.results.append(FollowUpError("no number", permanent=True))
    world.now += HOUR
    await world.followups().sweep()
    await world.followups().sweep()
    done = await world.get()
    assert world.sms.sent == [("dlv-1", False)] and done.status is DeliveryStatus.HELD
    assert (followup_state(done)["state"], followup_state(done)["error"]) == (
        "refused",
        "no number",
    )


async def test_a_sender_stopped_mid_send_is_recovered_after_its_lease(world: World) -> None:
    await world.held()
    world.now += HOUR
    # Instance a claims it and stops in the middle of sending (its task is gone).
    hanging = Channel()
    entered = asyncio.Event()

    async def never(record: DeliveryRecord, *, recover: bool) -> str:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    hanging.send = never  # type: ignore[method-assign]
    stopped = world.followups(owner="a")
    stopped.senders["sms"] = hanging
    sweeping = asyncio.create_task(stopped.sweep())
    await entered.wait()
    sweeping.cancel()
    claimed = await world.get()
    assert claimed.status is DeliveryStatus.DELIVERING and claimed.lease_owner == "a"
    survivor = world.followups(owner="b")
    assert await survivor.sweep() == world.now + 60  # a's lease still runs
    assert world.sms.sent == []
    world.now += 61
    await survivor.sweep()
    assert world.sms.sent == [("dlv-1", True)]  # a recovery: the channel checks first
    assert followup_state(await world.get())["state"] == "sent"


async def test_fallback_none_lets_it_expire(world: World) -> None:
    await world.held()
    world.now += HOUR
    await world.followups(channel="none").sweep()
    done = await world.get()
    assert done.status is DeliveryStatus.EXPIRED and followup_state(done)["state"] == "none"
    assert world.sms.sent == []


async def test_a_result_the_outbox_expired_while_down_still_goes_out(tmp_path: Path) -> None:
    """A server down past the outbox's time to live expires the result when it starts; the
    follow-up still sends it (and the TTL text is the one the decision looks for)."""
    store = SQLiteStore(tmp_path / "voicehub.db")
    now = [10_000.0]
    hub = Hub(store=store, instance=HubInstance(wall=lambda: now[0]))
    hub.delivery = DeliveryService(hub, ttl=HOUR, wall=lambda: now[0])
    await hub.start()
    delivery_id = await hub.delivery.deliver("research:tel-1", "Solar pays back.")
    await hub.aclose()
    now[0] += 2 * HOUR
    store = SQLiteStore(tmp_path / "voicehub.db")
    hub = Hub(store=store, instance=HubInstance(wall=lambda: now[0]))
    hub.delivery = DeliveryService(hub, ttl=HOUR, wall=lambda: now[0])
    await hub.start()  # the restart expires it
    expired = await store.get_delivery(delivery_id)
    assert expired is not None and (expired.status, expired.error) == ("expired", TTL_ERROR)
    sms = Channel()
    followups = FollowUps(
        store,
        plans={"research": FollowUpPlan(HOUR, "sms")},
        senders={"sms": sms},
        clock=hub.clock,
        wall=lambda: now[0],
        owner="b",
    )
    await followups.sweep()
    done = await store.get_delivery(delivery_id)
    assert sms.sent == [(delivery_id, False)] and done is not None
    assert done.status is DeliveryStatus.DELIVERED
    await hub.aclose()
