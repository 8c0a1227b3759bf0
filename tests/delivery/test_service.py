"""The delivery service driver on a virtual clock: timing, rooms, outcomes, durability.

Every test runs on `VirtualClock` (no wall-clock sleeps) against `FakeSession`, which
records each injection and whether the caller was speaking when it started. The RoomKit
weaknesses of seeds/README.md each have a test here:

1. WaitForIdle re-checks after its buffer and never talks over the caller on max_wait:
   `test_speech_resuming_inside_the_buffer_restarts_the_wait`,
   `test_max_wait_reached_while_the_caller_talks_waits_for_the_next_gap`.
2. No global queue: `test_an_idle_room_is_not_delayed_by_a_busy_room`.
3. A result whose call ended is kept: `test_call_end_holds_results_until_the_same_room_reconnects`,
   `test_a_crash_loses_nothing_and_repeats_nothing` (durable across a restart).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookResult, HookTrigger
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus, Store
from voicehub.core.store.memory import MemoryStore
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.delivery.injector import AlwaysIdle, InjectOutcome, TextInjector
from voicehub.delivery.policy import DeliveryStrategy, Immediate, Queued, WaitForIdle
from voicehub.delivery.service import DeliveryService
from voicehub.hub import Hub
from voicehub_dev.fakes.scripted_session import FakeSession

HubFactory = Callable[..., Awaitable[Hub]]
WAIT_1S = WaitForIdle(buffer=1.0)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(params=["memory", "sqlite"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Store]:
    """Each test runs on the in-process stores: the one a hub gets when the test names none.
    (The virtual clock settles the loop, not socket I/O, so Redis has tests of its own in
    test_instances.py that wait for outcomes instead.)"""
    if request.param == "memory":
        return MemoryStore
    return lambda: SQLiteStore(tmp_path / f"{uuid.uuid4().hex}.db")


@pytest.fixture
async def make_hub(
    clock: VirtualClock, new_store: Callable[[], Store]
) -> AsyncIterator[HubFactory]:
    """Build started hubs on the virtual clock; closes them at the end of the test."""
    hubs: list[Hub] = []

    async def make(
        strategy: DeliveryStrategy | str = WAIT_1S,
        *,
        store: Store | None = None,
        start: bool = True,
        **service: Any,
    ) -> Hub:
        store = store if store is not None else new_store()
        hub = Hub(clock=clock, delivery_strategy=strategy, store=store)
        if service:
            hub.delivery = DeliveryService(hub, default_strategy=strategy, **service)
        if start:
            await hub.start()
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        await hub.aclose()


class AfterLog:
    """Records what AFTER_DELIVER hooks saw."""

    def __init__(self, hub: Hub) -> None:
        self.events: list[Event] = []

        @hub.hook(HookTrigger.AFTER_DELIVER)
        async def record(event: Event, context: HookContext) -> None:
            self.events.append(event)

    def outcomes(self, delivery_id: str | None = None) -> list[str]:
        return [
            str(e.metadata["outcome"])
            for e in self.events
            if delivery_id is None or e.metadata["delivery_id"] == delivery_id
        ]


async def record_of(hub: Hub, delivery_id: str) -> DeliveryRecord:
    record = await hub.store.get_delivery(delivery_id)
    assert record is not None
    return record


async def attach(hub: Hub, room_id: str, session: FakeSession) -> None:
    await hub.delivery.attach(room_id, session, session.activity)


async def detach(hub: Hub, room_id: str, session: FakeSession) -> None:
    session.activity.session_detached()
    await hub.delivery.detach(room_id)


async def advance_to(clock: VirtualClock, t: float) -> None:
    await clock.advance(t - clock.now())


# -- WaitForIdle: RoomKit weakness 1 ----------------------------------------------------


async def test_speech_resuming_inside_the_buffer_restarts_the_wait(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    session = FakeSession(clock)
    await attach(hub, "r", session)
    session.user_starts()
    await hub.deliver("r", "result one")
    # The caller pauses for less than the buffer twice, then for good at 3.5 s.
    session.play(
        [
            (0.5, session.user_stops),
            (1.2, session.user_starts),  # inside the buffer that began at 0.5
            (2.0, session.user_stops),
            (2.9, session.user_starts),  # inside the buffer that began at 2.0
            (3.5, session.user_stops),
        ]
    )
    await advance_to(clock, 4.49)
    assert session.injections == []
    await advance_to(clock, 10.0)
    assert [(i.started, i.text) for i in session.injections] == [(4.5, "result one")]
    assert session.talked_over_caller == []


async def test_the_buffer_also_restarts_when_the_agent_speaks_inside_it(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    session = FakeSession(clock)
    await attach(hub, "r", session)
    await hub.deliver("r", "result")
    session.play([(0.6, lambda: session.agent_talks(2.0))])  # the agent answers at 0.6 s
    await advance_to(clock, 10.0)
    assert [i.started for i in session.injections] == [3.6]


async def test_max_wait_reached_while_the_caller_talks_waits_for_the_next_gap(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=5.0, max_wait=2.0))
    session = FakeSession(clock)
    await attach(hub, "r", session)
    session.user_starts()
    await hub.deliver("r", "late result")
    session.play([(6.0, session.user_stops)])
    await advance_to(clock, 5.99)
    assert session.injections == []  # max_wait passed at 2 s, but the caller is talking
    await advance_to(clock, 20.0)
    # The first gap, without waiting the 5 s buffer again, and not over the caller.
    assert [i.started for i in session.injections] == [6.0]
    assert session.talked_over_caller == []


async def test_max_wait_does_not_cut_the_agent_either(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=5.0, max_wait=1.0))
    session = FakeSession(clock, playout_delay=0.5)
    await attach(hub, "r", session)
    session.play([(0.0, lambda: session.agent_talks(3.0))])
    await clock.advance(0)
    await hub.deliver("r", "result")
    await advance_to(clock, 20.0)
    # Agent speech ends at 3.0, its playout is confirmed at 3.5: that is the gap.
    assert [(i.started, i.cut_agent) for i in session.injections] == [(3.5, False)]
    assert session.cut_agent_unasked == []


# -- Queued ---------------------------------------------------------------------------


async def test_queued_turns_three_results_into_one_injection(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Queued(buffer=2.0))
    after = AfterLog(hub)
    session = FakeSession(clock)
    await attach(hub, "r", session)
    ids = [await hub.deliver("r", "first")]
    await advance_to(clock, 1.0)
    ids.append(await hub.deliver("r", "second"))
    await advance_to(clock, 2.5)
    ids.append(await hub.deliver("r", "third"))
    await advance_to(clock, 4.49)
    assert session.injections == []  # the batch closes 2 s after its last arrival
    await advance_to(clock, 20.0)
    assert len(session.injections) == 1
    injection = session.injections[0]
    assert injection.started == 4.5
    assert injection.text == "first\n\nsecond\n\nthird"
    assert injection.delivery_ids == ids
    assert injection.allow_interrupt is False
    for delivery_id in ids:
        record = await record_of(hub, delivery_id)
        assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert after.outcomes() == ["delivered"] * 3
    assert {e.metadata["strategy"] for e in after.events} == {"queued"}


async def test_a_queued_batch_waits_for_the_caller(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Queued(buffer=1.0))
    session = FakeSession(clock)
    await attach(hub, "r", session)
    session.user_starts()
    await hub.deliver("r", "a")
    await hub.deliver("r", "b")
    session.play([(7.0, session.user_stops)])
    await advance_to(clock, 20.0)
    assert [(i.started, i.text) for i in session.injections] == [(7.0, "a\n\nb")]


# -- rooms: RoomKit weakness 2 -----------------------------------------------------------


@pytest.mark.parametrize("strategy", [Queued(buffer=1.0), WaitForIdle(buffer=1.0)])
async def test_an_idle_room_is_not_delayed_by_a_busy_room(
    clock: VirtualClock, make_hub: HubFactory, strategy: DeliveryStrategy
) -> None:
    hub = await make_hub(strategy)
    busy, calm = FakeSession(clock), FakeSession(clock)
    await attach(hub, "busy", busy)
    await attach(hub, "calm", calm)
    busy.user_starts()  # talks for a minute without a pause
    busy.play([(60.0, busy.user_stops)])
    await hub.deliver("busy", "busy result")
    await hub.deliver("calm", "calm result")
    await advance_to(clock, 30.0)
    assert [(i.started, i.text) for i in calm.injections] == [(1.0, "calm result")]
    assert busy.injections == []
    await advance_to(clock, 100.0)
    assert len(busy.injections) == 1
    assert busy.injections[0].started >= 60.0
    assert busy.talked_over_caller == []


# -- interruption --------------------------------------------------------------------


async def test_an_interrupted_delivery_is_spoken_again_exactly_once(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    after = AfterLog(hub)
    session = FakeSession(clock, speech_seconds=2.0)
    await attach(hub, "r", session)
    delivery_id = await hub.deliver("r", "your flight is booked")
    # Spoken at 1.0; the caller barges in at 2.0 and talks until 3.0.
    session.play([(2.0, session.user_starts), (3.0, session.user_stops)])
    await advance_to(clock, 2.5)
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.INTERRUPTED, 1)
    await advance_to(clock, 60.0)
    assert [(i.started, i.outcome) for i in session.injections] == [
        (1.0, InjectOutcome.INTERRUPTED),
        (4.0, InjectOutcome.FINISHED),  # next idle: 3.0 + the 1 s buffer
    ]
    assert session.injections_per_id() == {delivery_id: 2}
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 2)
    assert after.outcomes() == ["interrupted", "delivered"]
    assert session.talked_over_caller == []


# -- call end and reconnect: RoomKit weakness 3 ---------------------------------------


async def test_call_end_holds_results_until_the_same_room_reconnects(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    after = AfterLog(hub)
    first = FakeSession(clock)
    await attach(hub, "conv-1", first)
    first.user_starts()
    ids = [await hub.deliver("conv-1", "one"), await hub.deliver("conv-1", "two")]
    await advance_to(clock, 5.0)
    await detach(hub, "conv-1", first)  # the caller hangs up while still talking
    for delivery_id in ids:
        assert (await record_of(hub, delivery_id)).status is DeliveryStatus.HELD
    assert after.outcomes() == ["held", "held"]
    await advance_to(clock, 100.0)
    assert first.injections == []

    second = FakeSession(clock)  # the same conversation calls back
    await attach(hub, "conv-1", second)
    await advance_to(clock, 200.0)
    assert second.texts == ["one", "two"]
    assert second.injections_per_id() == {ids[0]: 1, ids[1]: 1}
    assert second.injections[0].started == 101.0  # a fresh buffer for the new call
    for delivery_id in ids:
        assert (await record_of(hub, delivery_id)).status is DeliveryStatus.DELIVERED
    assert after.outcomes()[2:] == ["delivered", "delivered"]


async def test_a_reconnecting_caller_gets_the_full_buffer_even_past_max_wait(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0, max_wait=2.0))
    delivery_id = await hub.deliver("r", "result")  # no call in progress: held
    await advance_to(clock, 10.0)  # max_wait long passed
    session = FakeSession(clock)
    await attach(hub, "r", session)
    await clock.advance(0)
    assert session.injections == []  # not blurted out the instant the caller connects
    await advance_to(clock, 20.0)
    assert [i.started for i in session.injections] == [11.0]
    assert session.injections_per_id() == {delivery_id: 1}


async def test_a_call_ending_mid_speech_holds_the_item_for_the_next_call(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    first = FakeSession(clock, speech_seconds=3.0)
    await attach(hub, "r", first)
    delivery_id = await hub.deliver("r", "result")
    await advance_to(clock, 2.0)  # speaking since 1.0
    assert len(first.injections) == 1
    await detach(hub, "r", first)
    record = await record_of(hub, delivery_id)
    assert record.status is DeliveryStatus.HELD  # never confirmed, so not delivered
    second = FakeSession(clock)
    await attach(hub, "r", second)
    await advance_to(clock, 20.0)
    assert second.injections_per_id() == {delivery_id: 1}
    assert (await record_of(hub, delivery_id)).status is DeliveryStatus.DELIVERED


async def test_a_room_with_no_session_holds_items_and_deliver_never_raises(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub()
    after = AfterLog(hub)

    @hub.hook(HookTrigger.AFTER_DELIVER)
    async def broken_observer(event: Event, context: HookContext) -> None:
        raise RuntimeError("observer bug")

    # No room was even created: the result is still kept for that conversation.
    delivery_id = await hub.deliver("nobody-here", "result", metadata={"task": "t1"})
    assert (await record_of(hub, delivery_id)).status is DeliveryStatus.HELD
    assert after.outcomes() == ["held"]
    assert [r.id for r in hub.delivery.pending("nobody-here")] == [delivery_id]
    await advance_to(clock, 50.0)
    assert (await record_of(hub, delivery_id)).status is DeliveryStatus.HELD


async def test_a_draining_instance_starts_no_result_and_the_next_one_speaks_it_once(
    clock: VirtualClock, make_hub: HubFactory, tmp_path: Path
) -> None:
    # A result the draining instance started would be cut by the call's hand-over and
    # spoken again from its start by the next instance (a second attempt)
    path = tmp_path / "voicehub.db"
    draining = await make_hub(WAIT_1S, store=SQLiteStore(path), wall=clock.now, owner="b")
    speaking = FakeSession(clock, speech_seconds=3.0)
    await attach(draining, "r", speaking)
    first = await draining.deliver("r", "first", delivery_id="first")
    await advance_to(clock, 2.0)  # "first" is being spoken (1.0 to 4.0)
    draining.delivery.hand_over_results()  # the drain begins: the call will move
    second = await draining.deliver("r", "second", delivery_id="second")
    await advance_to(clock, 30.0)
    assert speaking.injections_per_id() == {first: 1}  # what was being spoken went on
    assert (await record_of(draining, first)).status is DeliveryStatus.DELIVERED
    waiting = await record_of(draining, second)
    assert (waiting.status, waiting.attempts) == (DeliveryStatus.PENDING, 0)
    await detach(draining, "r", speaking)  # handed over
    assert (await record_of(draining, second)).status is DeliveryStatus.HELD

    taking = await make_hub(WAIT_1S, store=SQLiteStore(path), wall=clock.now, owner="c")
    moved = FakeSession(clock)
    await attach(taking, "r", moved)
    await advance_to(clock, 60.0)
    assert moved.injections_per_id() == {second: 1}
    spoken = await record_of(taking, second)
    assert (spoken.status, spoken.attempts) == (DeliveryStatus.DELIVERED, 1)


async def with_slow_before_deliver_hook(hub: Hub, clock: VirtualClock) -> tuple[Hub, FakeSession]:
    """`hub` with a before-deliver hook that takes 0.5 s (e.g. a moderation call) and a
    session attached to room "r"."""

    @hub.hook(HookTrigger.BEFORE_DELIVER)
    async def slow_check(event: Event, context: HookContext) -> None:
        await clock.sleep(0.5)

    session = FakeSession(clock)
    await attach(hub, "r", session)
    return hub, session


async def test_a_drain_beginning_while_before_deliver_hooks_run_claims_nothing(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub, session = await with_slow_before_deliver_hook(await make_hub(WAIT_1S), clock)
    delivery_id = await hub.deliver("r", "result")
    await advance_to(clock, 1.2)  # the hook runs from 1.0 to 1.5
    hub.delivery.hand_over_results()
    await advance_to(clock, 20.0)
    assert session.injections == []
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.PENDING, 0)


# -- crash and restart: RoomKit weakness 3, durable --------------------------------------


class HangingSession(FakeSession):
    """Starts speaking and never finishes: the process dies mid-speech."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.driver: asyncio.Task[Any] | None = None

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        self.driver = asyncio.current_task()
        return await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)


async def test_a_crash_loses_nothing_and_repeats_nothing(
    clock: VirtualClock, make_hub: HubFactory, tmp_path: Path
) -> None:
    from voicehub.core.store.sqlite import SQLiteStore

    path = tmp_path / "voicehub.db"
    crashed_store = SQLiteStore(path)
    # Leases run on the injected wall clock: the crashed instance's lease on "a" runs out
    # inside the minute below, and only then may the restarted one speak it.
    crashed = await make_hub(
        WaitForIdle(buffer=1.0), store=crashed_store, start=False, wall=clock.now
    )
    await crashed.start()
    hanging = HangingSession(clock)
    hanging.speech_seconds = 1e9
    await attach(crashed, "r", hanging)
    a = await crashed.deliver("r", "a", delivery_id="a")
    await advance_to(clock, 1.5)  # "a" is being spoken
    b = await crashed.deliver("r", "b", delivery_id="b")
    c = await crashed.deliver("r", "c", delivery_id="c", strategy=Queued(buffer=1.0))
    d = await crashed.deliver("other", "d", delivery_id="d")  # no session there: held
    assert hanging.texts == ["a"]
    # The crash: the driver dies mid-speech, nothing is closed or cleaned up.
    assert hanging.driver is not None
    hanging.driver.cancel()
    await clock.advance(0)
    statuses = {r.id: r.status for r in await crashed_store.list_deliveries()}
    assert statuses == {
        a: DeliveryStatus.DELIVERING,
        b: DeliveryStatus.PENDING,
        c: DeliveryStatus.PENDING,
        d: DeliveryStatus.HELD,
    }

    restarted = await make_hub(WaitForIdle(buffer=1.0), store=SQLiteStore(path), wall=clock.now)
    r_session, other_session = FakeSession(clock), FakeSession(clock)
    await attach(restarted, "r", r_session)
    await attach(restarted, "other", other_session)
    await clock.advance(60.0)
    assert r_session.injections_per_id() == {a: 1, b: 1, c: 1}
    assert other_session.injections_per_id() == {d: 1}
    for delivery_id in (a, b, c, d):
        record = await record_of(restarted, delivery_id)
        assert record.status is DeliveryStatus.DELIVERED, delivery_id
    assert (await record_of(restarted, a)).attempts == 2  # the crashed attempt counts
    # The same ids handed in again after the restart (a retried worker) change nothing.
    assert await restarted.deliver("r", "a", delivery_id="a") == a
    await restarted.aclose()

    again = await make_hub(WaitForIdle(buffer=1.0), store=SQLiteStore(path))
    third = FakeSession(clock)
    await attach(again, "r", third)
    await clock.advance(60.0)
    assert third.injections == []
    await crashed_store.close()


async def test_a_clean_restart_delivers_held_items(
    clock: VirtualClock, make_hub: HubFactory, tmp_path: Path
) -> None:
    from voicehub.core.store.sqlite import SQLiteStore

    path = tmp_path / "voicehub.db"
    first = await make_hub(Queued(buffer=1.0), store=SQLiteStore(path))
    session = FakeSession(clock)
    await attach(first, "r", session)
    session.user_starts()
    ids = [await first.deliver("r", "x"), await first.deliver("r", "y")]
    await detach(first, "r", session)
    await first.aclose()

    second = await make_hub(Queued(buffer=1.0), store=SQLiteStore(path))
    assert {r.id for r in second.delivery.pending("r")} == set(ids)
    reconnected = FakeSession(clock)
    await attach(second, "r", reconnected)
    await clock.advance(30.0)
    assert reconnected.texts == ["x\n\ny"]  # the strategy survived the restart
    assert reconnected.injections_per_id() == {ids[0]: 1, ids[1]: 1}


# -- exactly once ------------------------------------------------------------------------


async def test_the_same_delivery_id_twice_is_one_record_and_one_injection(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    session = FakeSession(clock)
    await attach(hub, "r", session)
    assert await hub.deliver("r", "result", delivery_id="x") == "x"
    assert await hub.deliver("r", "result (retried)", delivery_id="x") == "x"
    await advance_to(clock, 10.0)
    assert await hub.deliver("r", "result (late retry)", delivery_id="x") == "x"
    await advance_to(clock, 20.0)
    records = await hub.store.list_deliveries(room_id="r")
    assert [(r.id, r.content, r.status) for r in records] == [
        ("x", "result", DeliveryStatus.DELIVERED)
    ]
    assert session.texts == ["result"]


async def test_a_delivery_id_reused_for_another_room_keeps_the_first_record(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub()
    assert await hub.deliver("room-a", "for a", delivery_id="task-1") == "task-1"
    assert await hub.deliver("room-b", "for b", delivery_id="task-1") == "task-1"
    record = await record_of(hub, "task-1")
    assert (record.room_id, record.content, record.status) == ("room-a", "for a", "held")
    assert hub.delivery.pending("room-b") == []
    session = FakeSession(clock)
    await attach(hub, "room-a", session)
    await advance_to(clock, 10.0)
    assert session.texts == ["for a"]


# -- time to live --------------------------------------------------------------------------


async def test_an_item_past_its_time_to_live_expires_and_is_never_spoken(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = Hub(clock=clock, delivery_strategy=WaitForIdle(buffer=1.0))
    hub.delivery = DeliveryService(
        hub, default_strategy=WaitForIdle(buffer=1.0), wall=clock.now, ttl=10.0
    )
    await hub.start()
    after = AfterLog(hub)
    session = FakeSession(clock)
    await attach(hub, "r", session)
    session.user_starts()  # a long monologue: no gap for 30 s
    session.play([(30.0, session.user_stops)])
    delivery_id = await hub.deliver("r", "stale result")
    await advance_to(clock, 10.5)
    # Expired at its time to live, not later at the next activity change.
    record = await record_of(hub, delivery_id)
    assert record.status is DeliveryStatus.EXPIRED
    assert after.outcomes() == ["expired"]
    assert after.events[0].metadata["strategy"] == "wait_for_idle"
    await advance_to(clock, 60.0)
    assert session.injections == []
    assert hub.delivery.pending("r") == []
    await hub.aclose()


async def test_a_held_item_past_its_time_to_live_is_not_spoken_on_reconnect(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0), wall=clock.now, ttl=10.0)
    after = AfterLog(hub)
    delivery_id = await hub.deliver("r", "stale result")
    await advance_to(clock, 30.0)
    session = FakeSession(clock)
    await attach(hub, "r", session)
    await advance_to(clock, 60.0)
    assert session.injections == []
    assert (await record_of(hub, delivery_id)).status is DeliveryStatus.EXPIRED
    assert after.outcomes() == ["held", "expired"]


# -- failures and max attempts -------------------------------------------------------------


class FailingSession(FakeSession):
    """A session whose speech synthesis fails for texts containing "bad"."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock)
        self.failed_at: list[float] = []

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        if "bad" in text:
            self.failed_at.append(self.clock.now())
            raise RuntimeError("speech synthesis is down")
        return await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)


async def test_an_injector_that_always_raises_fails_after_max_attempts(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0), max_attempts=3)
    after = AfterLog(hub)
    session = FailingSession(clock)
    await attach(hub, "r", session)
    bad = await hub.deliver("r", "bad result")
    await advance_to(clock, 5.0)
    record = await record_of(hub, bad)
    assert (record.status, record.attempts) == (DeliveryStatus.FAILED, 3)
    assert "RuntimeError: speech synthesis is down" in record.error
    assert session.failed_at == [1.0, 2.0, 4.0]  # retries back off: 1 s, then 2 s
    events = [e for e in after.events if e.metadata["delivery_id"] == bad]
    assert [e.metadata["outcome"] for e in events] == ["failed"] * 3
    assert [e.metadata["attempt"] for e in events] == [1, 2, 3]
    assert all("speech synthesis is down" in str(e.metadata["error"]) for e in events)
    assert [e.metadata.get("final") for e in events] == [False, False, True]
    # The room's driver is still alive for the next result.
    good = await hub.deliver("r", "good result")
    await advance_to(clock, 20.0)
    assert session.texts == ["good result"]
    assert (await record_of(hub, good)).status is DeliveryStatus.DELIVERED


class DownForAWhile(FakeSession):
    """A session whose voice raises on every injection until `up_at`."""

    def __init__(self, clock: VirtualClock, up_at: float) -> None:
        super().__init__(clock)
        self.up_at = up_at
        self.failed_at: list[float] = []

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        if self.clock.now() < self.up_at:
            self.failed_at.append(self.clock.now())
            raise RuntimeError("voice fault: the TTS is down")
        return await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)


async def test_a_result_outlives_a_voice_outage_of_twenty_seconds_by_default(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))  # the hub's own service: its defaults
    session = DownForAWhile(clock, up_at=20.0)
    await attach(hub, "r", session)
    delivery_id = await hub.deliver("r", "heat pumps cut heating bills")
    await advance_to(clock, 60.0)
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 6)
    assert session.failed_at == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert session.texts == ["heat pumps cut heating bills"]  # once


class ConfusedSession(FakeSession):
    """An injector that returns something other than an `InjectOutcome`."""

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        await super().inject(text, allow_interrupt=allow_interrupt, metadata=metadata)
        return "ok"  # type: ignore[return-value]


async def test_an_injector_returning_no_outcome_counts_as_a_failed_attempt(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Immediate(), max_attempts=2)
    session = ConfusedSession(clock)
    await attach(hub, "r", session)
    delivery_id = await hub.deliver("r", "result")
    await advance_to(clock, 30.0)
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.FAILED, 2)
    assert "injector returned 'ok'" in record.error
    assert [i.started for i in session.injections] == [0.0, 3.0]  # 2 s speech + 1 s back-off


# -- hooks ----------------------------------------------------------------------------------


async def test_a_blocking_before_deliver_hook_fails_the_item_unspoken(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    after = AfterLog(hub)

    @hub.hook(HookTrigger.BEFORE_DELIVER)
    async def no_secrets(event: Event, context: HookContext) -> HookResult:
        if "password" in event.text:
            return HookResult.block("contains a password")
        return HookResult.allow()

    session = FakeSession(clock)
    await attach(hub, "r", session)
    blocked = await hub.deliver("r", "the password is hunter2")
    allowed = await hub.deliver("r", "the weather is fine")
    await advance_to(clock, 20.0)
    assert session.texts == ["the weather is fine"]
    record = await record_of(hub, blocked)
    assert record.status is DeliveryStatus.FAILED
    assert "no_secrets" in record.error and "contains a password" in record.error
    assert after.outcomes(blocked) == ["failed"]
    assert after.outcomes(allowed) == ["delivered"]


async def test_a_rewriting_before_deliver_hook_changes_what_is_spoken(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    after = AfterLog(hub)
    seen: list[dict[str, Any]] = []

    @hub.hook(HookTrigger.BEFORE_DELIVER)
    async def announce(event: Event, context: HookContext) -> Event:
        seen.append(dict(event.metadata))
        return event.model_copy(update={"text": f"Good news: {event.text}"})

    session = FakeSession(clock)
    await attach(hub, "r", session)
    delivery_id = await hub.deliver(
        "r", "the table is booked", metadata={"task_id": "t-7", "strategy": "spoofed"}
    )
    await advance_to(clock, 20.0)
    assert session.texts == ["Good news: the table is booked"]
    assert seen[0]["strategy"] == "wait_for_idle"
    assert seen[0]["task_id"] == "t-7"
    assert session.injections[0].metadata["delivery_ids"] == [delivery_id]
    assert session.injections[0].metadata["strategy"] == "wait_for_idle"
    assert session.injections[0].metadata["task_id"] == "t-7"
    (event,) = after.events
    assert event.metadata["outcome"] == "delivered"
    assert event.metadata["strategy"] == "wait_for_idle"
    assert event.metadata["delivery_id"] == delivery_id
    assert event.metadata["error"] is None
    # The stored content is the original result; the rewrite is per attempt.
    assert (await record_of(hub, delivery_id)).content == "the table is booked"


async def test_the_caller_speaking_while_before_deliver_hooks_run_stops_the_attempt(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub, session = await with_slow_before_deliver_hook(
        await make_hub(WaitForIdle(buffer=1.0)), clock
    )
    delivery_id = await hub.deliver("r", "result")
    session.play([(1.2, session.user_starts), (3.0, session.user_stops)])
    await advance_to(clock, 20.0)
    assert session.talked_over_caller == []
    assert [i.started for i in session.injections] == [4.5]  # 3.0 + buffer + the hook
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)


async def test_a_failing_after_deliver_hook_never_makes_a_batch_speak_twice(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Queued(buffer=1.0))

    @hub.hook(HookTrigger.AFTER_DELIVER)
    async def broken_observer(event: Event, context: HookContext) -> None:
        raise RuntimeError("observer bug")

    session = FakeSession(clock)
    await attach(hub, "r", session)
    ids = [await hub.deliver("r", "a"), await hub.deliver("r", "b")]
    await advance_to(clock, 5.0)
    session.user_starts()  # later activity must not wake a second injection
    session.user_stops()
    await advance_to(clock, 30.0)
    assert session.injections_per_id() == {ids[0]: 1, ids[1]: 1}
    for delivery_id in ids:
        assert (await record_of(hub, delivery_id)).status is DeliveryStatus.DELIVERED


async def test_a_raising_before_deliver_hook_fails_open_and_the_room_goes_on(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    # A raising gate is logged and skipped (fail open): a broken filter must not lose a
    # result. The item is spoken exactly once and the room goes on.
    hub = await make_hub(WaitForIdle(buffer=1.0), max_attempts=2)
    after = AfterLog(hub)

    @hub.hook(HookTrigger.BEFORE_DELIVER)
    async def moderation(event: Event, context: HookContext) -> None:
        if "flaky" in event.text:
            raise ConnectionError("moderation service unreachable")

    session = FakeSession(clock)
    await attach(hub, "r", session)
    flaky = await hub.deliver("r", "flaky result")
    fine = await hub.deliver("r", "fine result")
    await advance_to(clock, 30.0)
    assert session.injections_per_id()[flaky] == 1
    assert (await record_of(hub, flaky)).status is DeliveryStatus.DELIVERED
    assert session.injections_per_id()[fine] == 1
    assert after.outcomes(fine) == ["delivered"]


async def test_a_call_ending_while_after_deliver_hooks_run_never_repeats_a_batch(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Queued(buffer=1.0))

    @hub.hook(HookTrigger.AFTER_DELIVER)
    async def slow_audit(event: Event, context: HookContext) -> None:
        if event.metadata["outcome"] == "delivered":
            await clock.sleep(5.0)  # e.g. writing to a slow audit service

    first = FakeSession(clock)
    await attach(hub, "r", first)
    ids = [await hub.deliver("r", "a"), await hub.deliver("r", "b")]
    await advance_to(clock, 4.0)  # spoken 1.0 to 3.0; the first audit runs until 8.0
    assert first.texts == ["a\n\nb"]
    await detach(hub, "r", first)  # the call ends during the audit
    second = FakeSession(clock)
    await attach(hub, "r", second)
    await advance_to(clock, 30.0)
    assert second.injections == []
    for delivery_id in ids:
        assert (await record_of(hub, delivery_id)).status is DeliveryStatus.DELIVERED


# -- Immediate --------------------------------------------------------------------------------


async def test_immediate_may_cut_the_agent_but_never_the_caller(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0))
    after = AfterLog(hub)
    session = FakeSession(clock)
    await attach(hub, "r", session)
    session.play([(0.0, lambda: session.agent_talks(5.0))])
    await advance_to(clock, 1.0)
    await hub.deliver("r", "urgent one", strategy=Immediate())
    await clock.advance(0)
    assert [(i.started, i.allow_interrupt, i.cut_agent) for i in session.injections] == [
        (1.0, True, True)
    ]
    await advance_to(clock, 10.0)
    session.user_starts()
    await hub.deliver("r", "urgent two", strategy="immediate")
    await advance_to(clock, 15.0)
    assert len(session.injections) == 1  # not while the caller speaks
    session.user_stops()
    await clock.advance(0)
    assert [(i.started, i.text) for i in session.injections][1:] == [(15.0, "urgent two")]
    assert session.talked_over_caller == []
    assert {e.metadata["strategy"] for e in after.events} == {"immediate"}


# -- text rooms ---------------------------------------------------------------------------------


async def test_a_text_room_gets_the_result_posted(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(Immediate())
    await hub.create_room("chat")
    await hub.delivery.attach("chat", TextInjector(hub, "chat"), AlwaysIdle(clock))
    delivery_id = await hub.deliver("chat", "here is your summary")
    await clock.advance(0)
    history = await hub.history("chat")
    posted = [e for e in history if e.text == "here is your summary"]
    assert len(posted) == 1
    assert posted[0].metadata["delivery_ids"] == [delivery_id]
    assert (await record_of(hub, delivery_id)).status is DeliveryStatus.DELIVERED


async def test_interruptions_never_use_a_result_up_and_then_it_is_offered(
    clock: VirtualClock, make_hub: HubFactory
) -> None:
    hub = await make_hub(WaitForIdle(buffer=1.0), max_attempts=2)
    after = AfterLog(hub)
    session = FakeSession(clock, speech_seconds=2.0)
    await attach(hub, "r", session)
    delivery_id = await hub.deliver("r", "the heat pump report", metadata={"task": "heat pumps"})
    # Spoken at 1.0, 4.0 and 7.0; the caller cuts it off each time (more than max_attempts).
    session.play(
        [
            (1.5, session.user_starts),
            (3.0, session.user_stops),
            (4.5, session.user_starts),
            (6.0, session.user_stops),
            (7.5, session.user_starts),
            (9.0, session.user_stops),
        ]
    )
    await advance_to(clock, 60.0)
    outcomes = [i.outcome for i in session.injections]
    assert outcomes == [InjectOutcome.INTERRUPTED] * 3 + [InjectOutcome.FINISHED]
    assert after.outcomes() == ["interrupted"] * 3 + ["delivered"]
    record = await record_of(hub, delivery_id)
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 4)
    # the first two went as they are; from the third on, the injector is asked to offer it
    assert [bool(i.metadata.get("offer")) for i in session.injections] == [False, False, True, True]
    assert session.talked_over_caller == []
