"""The drain's hand-over and a result being spoken (issue 38): at `HANDOVER_WAIT` a call
whose result is still being spoken is not cut (the next instance would speak it again from
its start); it is handed over once the result ended, or at the drain's deadline.

The real `Drain` and delivery service on a virtual clock; the call's voice is the scripted
`FakeSession` (a result speaks for `speech_seconds`); the switchboard is a small stand-in
that hands a call over as the real one does for the delivery (the room's results held when
the call leaves: `DeliveryService.detach`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryStatus
from voicehub.delivery.policy import WaitForIdle
from voicehub.hub import Hub
from voicehub.server.drain import HANDOVER_WAIT, Drain
from voicehub_dev.fakes.scripted_session import FakeSession

ROOM = "desk:drain-result"


@dataclass
class Call:
    room_id: str
    session: FakeSession
    saying: Any = None


class Board:
    """What the drain reads of the switchboard: its calls, its hub, and the hand-over."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.calls: dict[str, Call] = {}
        self.lifecycle = self
        self.handed_at: dict[str, float] = {}

    async def hand_over(self, call: Call) -> None:
        self.handed_at[call.room_id] = self.hub.clock.now()
        await self.hub.delivery.detach(call.room_id)  # the call's clean-up
        call.session.activity.session_detached()
        del self.calls[call.room_id]

    async def close_all(self) -> None:
        for call in list(self.calls.values()):
            await self.hand_over(call)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def hub(clock: VirtualClock) -> AsyncIterator[Hub]:
    async with Hub(clock=clock, delivery_strategy=WaitForIdle(buffer=1.0)) as started:
        yield started


async def calling(hub: Hub, clock: VirtualClock, speech_seconds: float) -> Board:
    board = Board(hub)
    session = FakeSession(clock, speech_seconds=speech_seconds)
    await hub.delivery.attach(ROOM, session, session.activity)
    board.calls[ROOM] = Call(ROOM, session)
    return board


async def peer_alive() -> bool:
    return True


async def test_a_result_being_spoken_at_the_hand_over_wait_is_let_end_first(
    hub: Hub, clock: VirtualClock
) -> None:
    board = await calling(hub, clock, speech_seconds=15.0)
    delivery_id = await hub.delivery.deliver(ROOM, "the heat pump report")
    await clock.advance(2.0)  # spoken from 1.0 to 16.0
    assert hub.delivery.speaking(ROOM)
    drain = Drain(clock, 60.0, cast(Any, board), peers=peer_alive)
    drain.begin()
    await clock.advance(HANDOVER_WAIT + 1.0)
    assert board.handed_at == {}  # not cut: the next instance would say it all again
    await clock.advance(10.0)
    assert 16.0 <= board.handed_at[ROOM] <= 16.5  # at its end
    record = await hub.store.get_delivery(delivery_id)
    assert record is not None
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert drain.handed_over == 1
    await drain.wait()


async def test_a_result_longer_than_the_drain_is_cut_at_its_deadline_and_held(
    hub: Hub, clock: VirtualClock
) -> None:
    board = await calling(hub, clock, speech_seconds=120.0)
    delivery_id = await hub.delivery.deliver(ROOM, "the very long report")
    await clock.advance(2.0)
    drain = Drain(clock, 30.0, cast(Any, board), peers=peer_alive)
    drain.begin()  # its deadline: 32.0
    await clock.advance(29.0)
    assert board.handed_at == {}
    await clock.advance(2.0)
    assert 32.0 <= board.handed_at[ROOM] <= 32.5
    record = await hub.store.get_delivery(delivery_id)
    assert record is not None  # cut: held, for the next instance to speak from its start
    assert (record.status, record.attempts) == (DeliveryStatus.HELD, 1)
    assert drain.handed_over == 1
    await drain.wait()
