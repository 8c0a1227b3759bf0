"""Phone callers brought into a LiveKit room by LiveKit SIP: a participant of kind SIP is
served like any other, its conversation keyed by the caller's number (the `sip.phoneNumber`
attribute) exactly as a Twilio caller's is, so held results follow the number; withheld
numbers, and desks set to one conversation per call, get a conversation for the call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.number_key import caller_conversation
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_folder
from voicehub.hub import Hub
from voicehub.workers.job import DeskJob
from voicehub.workers.load import CallLoad
from voicehub_dev.fakes.livekit_room import StandInRoom
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
NUMBER = "+15551234567"

NUMBER_KEY = b"k" * 32  # the store's caller-number secret


def sip(number: str, call_id: str) -> dict[str, str]:
    """The attributes LiveKit SIP sets on a caller's participant (those read here)."""
    return {"sip.phoneNumber": number, "sip.callID": call_id, "sip.trunkPhoneNumber": "+15550001"}


def research_desk(conversation: str = "caller") -> Desk:
    config = load_desk_folder(CHANNELS)["research"]
    phone = config.phone.model_copy(update={"conversation": conversation})
    return build_desk(config.model_copy(update={"phone": phone}))


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    hub = Hub(store=SQLiteStore(tmp_path / "worker.db"), orchestration=None)
    await hub.start()
    yield hub
    await hub.aclose()


@asynccontextmanager
async def serving(job: DeskJob) -> AsyncIterator[None]:
    task = asyncio.create_task(job.run())
    try:
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_sip_caller_continues_the_conversation_of_their_number(hub: Hub) -> None:
    desk = research_desk()
    room, factory = StandInRoom(), ScriptedStack()
    async with serving(
        DeskJob(CallLifecycle(hub, {}, factory), desk, room, CallLoad(2), number_key=NUMBER_KEY)
    ):
        room.join(f"sip_{NUMBER}", kind="sip", attributes=sip(NUMBER, "SCL_first"))
        await room.changes.wait_for(lambda: room.audio and room.audio[0].sink.queued)
        [first] = factory.sessions
        # the same conversation a Twilio call from this number has
        assert first.room_id == f"research:{caller_conversation(NUMBER, NUMBER_KEY)}"
        assert NUMBER not in first.room_id and "5551234567" not in first.room_id
        room.audio[0].sink.play_all()
        room.leave(f"sip_{NUMBER}")
        await room.changes.wait_for(lambda: room.audio[0].closed)

        delivery_id = await hub.delivery.deliver(
            first.room_id, "Heat pumps move heat.", strategy="immediate"
        )
        record = await hub.store.get_delivery(delivery_id)
        assert record is not None and record.status is DeliveryStatus.HELD

        # they phone again (a new SIP call, a new participant identity): the result is theirs
        room.join("sip-caller-2", kind="sip", attributes=sip("+1 555 123 4567", "SCL_second"))
        await room.changes.wait_for(lambda: len(room.audio) == 2 and room.audio[1].sink.queued)
        second = factory.sessions[1]
        assert second.room_id == first.room_id
        assert second.said == ["Heat pumps move heat."]


async def test_withheld_numbers_get_a_conversation_per_call(hub: Hub) -> None:
    desk = research_desk()
    room, factory = StandInRoom(), ScriptedStack()
    async with serving(
        DeskJob(CallLifecycle(hub, {}, factory), desk, room, CallLoad(4), number_key=NUMBER_KEY)
    ):
        room.join("sip_anonymous", kind="sip", attributes=sip("anonymous", "SCL_a"))
        await room.changes.wait_for(lambda: factory.sessions)
        room.leave("sip_anonymous")
        await room.changes.wait_for(lambda: room.audio[0].closed)
        room.join("sip_anonymous", kind="sip", attributes=sip("", "SCL_b"))
        await room.changes.wait_for(lambda: len(factory.sessions) == 2)
        first, second = (session.room_id for session in factory.sessions)
        assert first == "research:call-SCL_a" and second == "research:call-SCL_b"
        assert factory.sessions[1].said == [desk.greeting]  # a new conversation, greeted


async def test_a_desk_with_one_conversation_per_call_ignores_the_number(hub: Hub) -> None:
    room, factory = StandInRoom(), ScriptedStack()
    async with serving(
        DeskJob(
            CallLifecycle(hub, {}, factory),
            research_desk("call"),
            room,
            CallLoad(4),
            number_key=NUMBER_KEY,
        )
    ):
        room.join(f"sip_{NUMBER}", kind="sip", attributes=sip(NUMBER, "SCL_1"))
        await room.changes.wait_for(lambda: factory.sessions)
        assert factory.sessions[0].room_id == "research:call-SCL_1"


async def test_a_browser_participant_is_keyed_by_identity_even_with_sip_like_attributes(
    hub: Hub,
) -> None:
    room, factory = StandInRoom(), ScriptedStack()
    async with serving(
        DeskJob(
            CallLifecycle(hub, {}, factory),
            research_desk(),
            room,
            CallLoad(4),
            number_key=NUMBER_KEY,
        )
    ):
        room.join("alice", attributes=sip(NUMBER, "SCL_x"))  # only LiveKit SIP sets kind SIP
        await room.changes.wait_for(lambda: factory.sessions)
        assert factory.sessions[0].room_id == "research:alice"
