"""`DeskJob` on a stand-in room: the call's audio path, playout, held results, rejoin, SIP.

The session is the scripted one of the server tests (real transport path, no models): what
is tested here is the job's composition, i.e. which conversation a participant gets, that
the agent's audio reaches the room's track and delivery waits for that track's playout,
that results finishing while the caller is away are held and spoken when they come back,
and the live-call count LiveKit's load is computed from. Phone (SIP) callers:
`test_sip_callers.py`; transcripts in the room: `test_room_transcripts.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import Desk, load_desks
from voicehub.hub import Hub
from voicehub.workers.job import DeskJob
from voicehub.workers.load import CallLoad
from voicehub_dev.fakes.livekit_room import StandInRoom
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"

NUMBER_KEY = b"k" * 32  # the store's caller-number secret


@pytest.fixture
def desk() -> Desk:
    return load_desks(CHANNELS)["research"]


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    hub = Hub(store=SQLiteStore(tmp_path / "worker.db"), orchestration=None)
    await hub.start()
    yield hub
    await hub.aclose()


@asynccontextmanager
async def running(job: DeskJob) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(job.run())
    try:
        yield task
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_participant_is_answered_on_the_rooms_audio_and_playout_ends_the_speech(
    hub: Hub, desk: Desk
) -> None:
    room, factory, load = StandInRoom(), ScriptedStack(), CallLoad(2)
    job = DeskJob(CallLifecycle(hub, {}, factory), desk, room, load, number_key=NUMBER_KEY)
    async with running(job):
        room.join("alice")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].sink.queued)
        [audio] = room.audio
        [session] = factory.sessions
        assert session.room_id == "research:alice"
        assert load.calls == 1 and load.load() == 0.5
        assert session.said == [desk.greeting]
        # the greeting is on the track, not yet heard: the speech is not over
        marks = audio.transport.pending_marks
        assert marks and not session.confirmed
        audio.sink.play_all()
        await room.changes.wait_for(lambda: session.confirmed)
        assert session.confirmed == [marks[-1]] and audio.transport.pending_marks == ()
        # the caller's microphone reaches the session
        audio.speak(bytes(640))
        await room.changes.wait_for(lambda: len(session.caller_audio) == 640)
        assert any(e["type"] == "transcript" for e in room.events)
        room.leave("alice")
        await room.changes.wait_for(lambda: audio.closed)
        assert session.closed and load.calls == 0
        assert "research:alice" not in hub.rooms  # released; open in the store


async def test_results_finishing_while_the_caller_is_away_are_held_and_spoken_on_rejoin(
    hub: Hub, desk: Desk
) -> None:
    room, factory, load = StandInRoom(), ScriptedStack(), CallLoad(1)
    job = DeskJob(CallLifecycle(hub, {}, factory), desk, room, load, number_key=NUMBER_KEY)
    async with running(job):
        room.join("alice")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].sink.queued)
        room.audio[0].sink.play_all()
        room.leave("alice")
        await room.changes.wait_for(lambda: room.audio[0].closed)

        delivery_id = await hub.delivery.deliver(
            "research:alice", "Heat pumps move heat.", strategy="immediate"
        )
        record = await hub.store.get_delivery(delivery_id)
        assert record is not None and record.status is DeliveryStatus.HELD

        room.join("alice")  # back, as the same identity
        await room.changes.wait_for(lambda: len(room.audio) == 2 and room.audio[1].sink.queued)
        second = factory.sessions[1]
        assert second.room_id == "research:alice"
        assert second.said == ["Heat pumps move heat."]  # no greeting on a resumed call
        record = await hub.store.get_delivery(delivery_id)
        assert record is not None and record.status is not DeliveryStatus.DELIVERED
        room.audio[1].sink.play_all()  # delivered only once it has played
        await room.changes.wait_for(lambda: second.confirmed)

        async def delivered() -> bool:
            found = await hub.store.get_delivery(delivery_id)
            return found is not None and found.status is DeliveryStatus.DELIVERED

        for _ in range(100):  # the outcome is written by the delivery task after the ack
            if await delivered():
                break
            await asyncio.sleep(0)
        assert await delivered()


async def test_a_barge_in_clears_the_track_and_its_marks_are_never_confirmed(
    hub: Hub, desk: Desk
) -> None:
    room, factory = StandInRoom(), ScriptedStack()
    job = DeskJob(CallLifecycle(hub, {}, factory), desk, room, CallLoad(4), number_key=NUMBER_KEY)
    async with running(job):
        room.join("bob")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].transport.pending_marks)
        audio = room.audio[0]
        await audio.transport.clear()
        assert audio.sink.cleared == 1 and not audio.sink.queued
        assert audio.transport.pending_marks == ()
        for _ in range(10):  # let the playout watcher see the release (no clock involved)
            await asyncio.sleep(0)
        assert factory.sessions[0].confirmed == []


async def test_a_session_that_fails_to_start_does_not_count_as_a_call_or_end_the_job(
    hub: Hub, desk: Desk
) -> None:
    class Failing(ScriptedStack):
        async def start(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
            if not self.sessions and not getattr(self, "failed", False):
                self.failed = True
                raise RuntimeError("no model")
            return await super().start(*args, **kwargs)  # type: ignore[arg-type]

    room, factory, load = StandInRoom(), Failing(), CallLoad(1)
    job = DeskJob(CallLifecycle(hub, {}, factory), desk, room, load, number_key=NUMBER_KEY)
    async with running(job) as task:
        room.join("carol")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].closed)
        assert load.calls == 0 and not task.done()
        room.join("dave")
        await room.changes.wait_for(lambda: factory.sessions)
        assert factory.sessions[0].room_id == "research:dave"
