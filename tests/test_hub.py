"""The hub and its rooms: lifecycle, persistence, numbering, broadcast."""

from __future__ import annotations

import logging

import pytest

from voicehub.core.channels import Channel, TextChannel
from voicehub.core.events import Event, EventKind, message
from voicehub.core.room import Room
from voicehub.core.store.base import RoomStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.errors import RoomClosedError, RoomNotFoundError
from voicehub.hub import Hub


class Recorder(Channel):
    """A channel that keeps every event it is sent."""

    def __init__(self, channel_id: str) -> None:
        super().__init__(channel_id)
        self.events: list[Event] = []

    async def on_event(self, event: Event, room: Room) -> None:
        self.events.append(event)


class Broken(Channel):
    async def on_event(self, event: Event, room: Room) -> None:
        raise RuntimeError("this channel is broken")


async def test_create_room_is_open_and_stored() -> None:
    hub = Hub()
    room = await hub.create_room("call-1", metadata={"desk": "triage"})
    assert room.id == "call-1"
    assert room.is_open
    assert hub.rooms["call-1"] is room
    assert hub.room("call-1") is room
    stored = await hub.store.get_room("call-1")
    assert stored is not None
    assert stored.status is RoomStatus.OPEN
    assert stored.metadata == {"desk": "triage"}


async def test_create_room_without_id_generates_one() -> None:
    hub = Hub()
    first = await hub.create_room()
    second = await hub.create_room()
    assert first.id != second.id
    assert first.id.startswith("room-")


async def test_create_room_with_live_id_returns_the_same_room() -> None:
    hub = Hub()
    room = await hub.create_room("call-1")
    assert await hub.create_room("call-1") is room


async def test_child_room_has_parent_id() -> None:
    hub = Hub()
    parent = await hub.create_room("parent")
    child = await hub.create_room("parent::side", parent_id=parent.id)
    assert child.parent_id == "parent"
    children = await hub.store.list_rooms(parent_id="parent")
    assert [r.id for r in children] == ["parent::side"]


async def test_closed_room_is_stored_closed_and_dropped_from_memory() -> None:
    hub = Hub()
    room = await hub.create_room("call-1")
    text = TextChannel()
    await room.attach(text)
    await hub.close_room("call-1")

    assert "call-1" not in hub.rooms
    assert not room.is_open
    assert room.channels == {}
    stored = await hub.store.get_room("call-1")
    assert stored is not None
    assert stored.status is RoomStatus.CLOSED
    assert stored.closed_at is not None
    with pytest.raises(RoomNotFoundError):
        hub.room("call-1")


async def test_closing_an_unknown_room_is_a_no_op() -> None:
    hub = Hub()
    await hub.close_room("never-opened")


async def test_posting_to_a_closed_room_raises_room_closed_error() -> None:
    hub = Hub()
    room = await hub.create_room("call-1")
    await hub.close_room("call-1")

    with pytest.raises(RoomClosedError, match=r"room 'call-1' is closed"):
        await room.post(message("hello?"))
    with pytest.raises(RoomClosedError, match=r"call-1.*create_room"):
        await hub.post("call-1", message("hello?"))


async def test_posting_to_a_room_that_never_existed_raises_not_found() -> None:
    hub = Hub()
    with pytest.raises(RoomNotFoundError, match="nowhere"):
        await hub.post("nowhere", message("hi"))


async def test_reopening_a_stored_room_continues_seq_numbering() -> None:
    store = MemoryStore()
    hub = Hub(store=store)
    room = await hub.create_room("call-1")
    for text in ("one", "two", "three"):
        await room.post(message(text))
    await hub.close_room("call-1")

    # Same store, new process (a fresh hub): the reconnecting call keeps its history.
    again = await Hub(store=store).create_room("call-1", metadata={"reconnected": True})
    assert again.is_open
    assert again.last_seq == 3
    posted = await again.post(message("four"))
    assert posted is not None
    assert posted.seq == 4
    stored = await store.get_room("call-1")
    assert stored is not None
    assert stored.status is RoomStatus.OPEN
    assert stored.closed_at is None
    assert stored.metadata == {"reconnected": True}
    assert [e.text for e in await store.list_events("call-1")] == ["one", "two", "three", "four"]


async def test_seq_is_numbered_per_room() -> None:
    hub = Hub()
    a = await hub.create_room("a")
    b = await hub.create_room("b")
    seqs_a = [(await a.post(message(f"a{i}"))) for i in range(3)]
    seqs_b = [(await b.post(message(f"b{i}"))) for i in range(2)]
    assert [e.seq for e in seqs_a if e] == [1, 2, 3]
    assert [e.seq for e in seqs_b if e] == [1, 2]
    assert all(e.room_id == "a" for e in seqs_a if e)
    history = await hub.history("a")
    assert [e.text for e in history] == ["a0", "a1", "a2"]
    assert [e.text for e in await hub.history("a", limit=2)] == ["a1", "a2"]


async def test_posted_event_is_a_stamped_copy() -> None:
    hub = Hub()
    room = await hub.create_room("a")
    original = message("hi")
    stored = await room.post(original)
    assert stored is not None
    assert original.seq == 0
    assert original.room_id == ""
    assert (stored.seq, stored.room_id, stored.id) == (1, "a", original.id)


async def test_broadcast_skips_the_source_channel() -> None:
    hub = Hub()
    room = await hub.create_room("a")
    me, other = Recorder("me"), Recorder("other")
    await room.attach(me)
    await room.attach(other)
    await room.post(message("mine", source="me"))
    assert me.events == []
    assert [e.text for e in other.events] == ["mine"]


async def test_a_channel_that_raises_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = Hub()
    room = await hub.create_room("a")
    before, after = Recorder("before"), Recorder("after")
    await room.attach(before)
    await room.attach(Broken("broken"))
    await room.attach(after)

    with caplog.at_level(logging.ERROR, logger="voicehub.room"):
        stored = await room.post(message("hello"))

    assert stored is not None
    assert [e.text for e in before.events] == ["hello"]
    assert [e.text for e in after.events] == ["hello"]
    assert [e.text for e in await hub.history("a")] == ["hello"]
    assert "broken" in caplog.text


async def test_detach_stops_broadcasts() -> None:
    hub = Hub()
    room = await hub.create_room("a")
    recorder = Recorder("rec")
    await hub.attach("a", recorder)
    await room.post(message("one"))
    await room.detach("rec")
    await room.post(message("two"))
    assert [e.text for e in recorder.events] == ["one"]


async def test_set_metadata_persists() -> None:
    hub = Hub()
    room = await hub.create_room("a")
    await room.set_metadata(phase="intake")
    stored = await hub.store.get_room("a")
    assert stored is not None
    assert stored.metadata == {"phase": "intake"}


async def test_hub_as_context_manager_closes_cleanly() -> None:
    async with Hub() as hub:
        room = await hub.create_room()
        event = await room.post(Event(kind=EventKind.SYSTEM, text="x", role="system"))
        assert event is not None


async def test_release_room_unloads_it_but_keeps_it_open_in_the_store() -> None:
    from voicehub.core.events import message
    from voicehub.core.store.base import RoomStatus

    async with Hub() as hub:
        room = await hub.create_room("call-7", orchestration=None)
        await room.post(message("hello"))
        assert await hub.release_room("call-7")
        assert "call-7" not in hub.rooms
        stored = await hub.store.get_room("call-7")
        assert stored is not None and stored.status is RoomStatus.OPEN
        again = await hub.create_room("call-7", orchestration=None)  # the caller is back
        event = await again.post(message("me again"))
        assert event is not None and event.seq == 2


async def test_release_room_waits_while_work_runs_for_the_room() -> None:
    import asyncio

    async with Hub() as hub:
        await hub.create_room("busy", orchestration=None)
        gate = asyncio.Event()
        job = hub.jobs.start(gate.wait(), room_id="busy")
        assert not await hub.release_room("busy")
        assert "busy" in hub.rooms
        gate.set()
        await job
        assert await hub.release_room("busy")
