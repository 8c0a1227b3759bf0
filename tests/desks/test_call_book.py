"""The call records instances keep (`CallBook`): how a call continues the conversation's last
one, a call taken up elsewhere ending here, and a result whose speaker lost its call (or
died) spoken at once by the instance that has the call, not after the lease.

Two hubs on one store stand for two instances; time is virtual (leases run on `clock.now`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import CallState, DeliveryStatus, InstanceRecord
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.policy import Immediate
from voicehub.desks.call_book import CallBook
from voicehub.hub import Hub, HubInstance
from voicehub_dev.fakes.scripted_session import FakeSession

ROOM = "research:caller-1"


class Instance:
    def __init__(self, name: str, store: MemoryStore, clock: VirtualClock) -> None:
        self.book = CallBook(store, name, wall=clock.now)
        self.hub = Hub(
            store=store,
            clock=clock,
            delivery_strategy=Immediate(),
            instance=HubInstance(
                name, wall=clock.now, delivery_lease=15.0, lease_breaker=self.book.lease_breakable
            ),
        )
        self.session = FakeSession(clock, speech_seconds=4.0)

    async def answer(self) -> str:
        """Take the call and attach this instance's session; how the call continued."""
        takeover = await self.book.claim(ROOM, "research", "caller-1", "websocket", {})
        await self.hub.delivery.attach(ROOM, self.session, self.session.activity)
        return takeover.continuation


@pytest.fixture
async def pair() -> AsyncIterator[tuple[Instance, Instance, VirtualClock, MemoryStore]]:
    clock, store = VirtualClock(start=1000.0), MemoryStore()
    a, b = Instance("a", store, clock), Instance("b", store, clock)
    for instance in (a, b):
        await instance.hub.start()
        beat = InstanceRecord(
            id=instance.hub.instance_id, started_at=1000, seen_at=1000, expires_at=1010
        )
        await store.beat_instance(beat)
    yield a, b, clock, store
    for instance in (a, b):
        await instance.hub.delivery.aclose()


async def test_a_call_continues_new_then_failover_then_reconnect_then_handover(
    pair: tuple[Instance, Instance, VirtualClock, MemoryStore],
) -> None:
    a, b, _, store = pair
    assert (
        await a.book.claim(ROOM, "research", "caller-1", "twilio", {"call_sid": "CA1"})
    ).continuation == "new"
    taken = await b.book.claim(ROOM, "research", "caller-1", "twilio", {"call_sid": "CA1"})
    assert (taken.continuation, taken.previous_owner) == ("failover", "a")
    assert taken.previous_line == {"call_sid": "CA1"}
    assert a.book.noticed(ROOM, "b", 2)  # the store's announcement reaches a: taken
    assert not a.book.holds(ROOM)
    assert not a.book.noticed(ROOM, "b", 3)  # once
    assert (
        await b.book.claim(ROOM, "research", "caller-1", "twilio", {})
    ).continuation == "reconnect"
    await b.book.release(ROOM, CallState.HANDING_OVER)
    assert (
        await a.book.claim(ROOM, "research", "caller-1", "twilio", {})
    ).continuation == "handover"
    await a.book.release(ROOM, CallState.ENDED)
    record = await store.get_call(ROOM)
    assert record is not None and (record.state, record.owner, record.takeovers) == (
        CallState.ENDED,
        "a",
        2,
    )
    assert (await b.book.claim(ROOM, "research", "caller-1", "twilio", {})).continuation == "new"


async def test_a_write_that_loses_to_another_instance_ends_the_call_here(
    pair: tuple[Instance, Instance, VirtualClock, MemoryStore],
) -> None:
    a, b, _, _ = pair
    await a.book.claim(ROOM, "research", "caller-1", "twilio", {})
    await b.book.claim(ROOM, "research", "caller-1", "twilio", {})
    assert await a.book.update(ROOM, line={"stream_sid": "MZ2"}) is False
    assert not a.book.holds(ROOM)


async def test_the_result_a_lost_call_was_speaking_is_spoken_at_once_where_the_call_went(
    pair: tuple[Instance, Instance, VirtualClock, MemoryStore],
) -> None:
    a, b, clock, store = pair
    assert await a.answer() == "new"
    delivery_id = await a.hub.deliver(ROOM, "Heat pumps move heat.")
    await clock.advance(1.0)  # a is speaking it: its lease runs to 1016
    cut = await store.get_delivery(delivery_id)
    assert cut is not None and (cut.status, cut.lease_owner) == (DeliveryStatus.DELIVERING, "a")

    assert await b.answer() == "failover"  # the caller's line dropped; they came back to b
    await clock.advance(0.0)
    assert [i.text for i in b.session.injections] == ["Heat pumps move heat."]
    await clock.advance(5.0)  # b spoke it in full, long before a's lease ran out
    done = await store.get_delivery(delivery_id)
    assert done is not None and (done.status, done.attempts) == (DeliveryStatus.DELIVERED, 2)
    assert b.session.injections_per_id() == {delivery_id: 1}
    # a, still running, cannot settle it any more: its fence is stale
    await clock.advance(10.0)
    final = await store.get_delivery(delivery_id)
    assert final is not None and final.status is DeliveryStatus.DELIVERED and final.attempts == 2


async def test_a_lease_is_taken_over_at_once_when_its_holder_is_known_dead_and_else_waited_out(
    pair: tuple[Instance, Instance, VirtualClock, MemoryStore],
) -> None:
    a, b, clock, store = pair
    await a.answer()
    delivery_id = await a.hub.deliver(ROOM, "Heat pumps move heat.")
    await clock.advance(1.0)
    record = await store.get_delivery(delivery_id)
    assert record is not None and record.lease_owner == "a"
    # b has no call of the room: a's lease stands while a's heartbeat is live...
    assert await b.book.lease_breakable(record) is False
    # ...and falls the moment a's heartbeat has expired (or was swept away)
    await clock.advance(10.0)
    assert await b.book.lease_breakable(record) is True
    await store.remove_instance("a")
    assert await b.book.lease_breakable(record) is True


def test_the_lifecycle_ends_lines_with_the_websocket_close_codes() -> None:
    from voicehub.desks.call_lifecycle import CloseCode as LineEnd
    from voicehub.transports.websocket import CloseCode

    assert {code.name: int(code) for code in LineEnd} == {
        code.name: int(CloseCode[code.name]) for code in LineEnd
    }


async def test_the_question_a_lost_call_was_asked_is_pending_until_answered() -> None:
    from voicehub.core.events import Event, EventKind
    from voicehub.desks.call_resume import APOLOGY, CallResume, pending_question

    store = MemoryStore()
    seq = iter(range(1, 100))

    async def post(
        text: str, role: str, kind: EventKind = EventKind.MESSAGE, **meta: object
    ) -> Event:
        event = Event(room_id=ROOM, seq=next(seq), text=text, role=role, kind=kind, metadata=meta)
        await store.append_event(event)
        return event

    await post("Research heat pumps", "user", EventKind.TRANSCRIPT)
    question = await post("Which city?", "assistant", ask_user=True, spoken=True)
    await post("Which city?", "assistant", EventKind.TRANSCRIPT)  # as it was spoken
    assert await pending_question(store, ROOM) == (question.id, "Which city?")
    resume = CallResume("failover", "a", question="Which city?", question_id=question.id)
    assert resume.words() == f"{APOLOGY} Which city?"
    assert CallResume("handover", "a", question="Which city?").words() is None

    await post("Leeds", "user", EventKind.TRANSCRIPT, _answer_to=question.id)
    assert await pending_question(store, ROOM) is None  # answered
    await post("Is that all?", "assistant", ask_user=True)
    await post("Here is what I found.", "assistant")
    assert await pending_question(store, ROOM) is None  # the agent went on since
