"""The call's words in the room as LiveKit's playground and clients read them: text streams on
`lk.transcription` sent on behalf of the speaker, with RoomIO's attributes, and the agent's
state as its `lk.agent.state` attribute.

First on the scripted session (the stream shapes, the agent's greeting and a delivered
result), then on a real call: the offline stack hears a caller's Piper-synthesized words
from the stand-in room's microphone and answers.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.hub import Hub
from voicehub.transports.livekit_transcripts import (
    ATTRIBUTE_FINAL,
    ATTRIBUTE_SEGMENT_ID,
    ATTRIBUTE_TRACK_ID,
    TOPIC_TRANSCRIPTION,
)
from voicehub.voice.audio import frame_bytes
from voicehub.workers.job import DeskJob
from voicehub.workers.load import CallLoad
from voicehub_dev.fakes.livekit_room import (
    AGENT_TRACK,
    StandInAudio,
    StandInRoom,
    StandInTextStream,
    microphone_track,
)
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
RATE = 16000
AGENT = "voicehub-research-job-1"

NUMBER_KEY = b"k" * 32  # the store's caller-number secret


@pytest.fixture(scope="module")
def desk() -> Desk:
    return load_desks(CHANNELS)["research"]


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


def assert_agent_segment(stream: StandInTextStream) -> None:
    """RoomIO's agent output: opened not final, closed final, on the agent's track."""
    assert stream.topic == TOPIC_TRANSCRIPTION and stream.sender_identity == AGENT
    assert stream.header[ATTRIBUTE_FINAL] == "false"
    assert stream.header[ATTRIBUTE_SEGMENT_ID].startswith("SG_")
    assert stream.header[ATTRIBUTE_TRACK_ID] == AGENT_TRACK
    assert stream.trailer == {ATTRIBUTE_FINAL: "true", ATTRIBUTE_TRACK_ID: AGENT_TRACK}


async def test_the_agents_words_are_a_transcription_stream_per_speech(hub: Hub, desk: Desk) -> None:
    room, factory = StandInRoom(AGENT), ScriptedStack()
    agent = room.local_participant
    async with serving(
        DeskJob(CallLifecycle(hub, {}, factory), desk, room, CallLoad(2), number_key=NUMBER_KEY)
    ):
        room.join("alice")
        await room.changes.wait_for(lambda: agent.transcripts(AGENT))
        [greeting] = agent.transcripts(AGENT)
        assert greeting.text == desk.greeting
        assert_agent_segment(greeting)

        room.audio[0].sink.play_all()
        await hub.delivery.deliver("research:alice", "Heat pumps move heat.", strategy="immediate")
        await room.changes.wait_for(lambda: len(agent.transcripts(AGENT)) == 2)
        result = agent.transcripts(AGENT)[1]
        assert result.text == "Heat pumps move heat."
        assert_agent_segment(result)
        segments = {s.header[ATTRIBUTE_SEGMENT_ID] for s in agent.transcripts(AGENT)}
        assert len(segments) == 2  # one segment per speech
        assert not agent.transcripts("alice")  # the scripted session hears no words
        # the data-packet events still go to the caller too
        assert [e["text"] for e in room.events if e["type"] == "transcript"] == [
            desk.greeting,
            "Heat pumps move heat.",
        ]


async def listen_until(room: StandInRoom, audio: StandInAudio, done: Callable[[], bool]) -> None:
    """The caller hears whatever the agent plays until `done` (audio plays out at once)."""

    async def listen() -> None:
        while not done():
            await room.changes.wait_for(lambda: bool(audio.sink.queued) or done(), timeout=120)
            audio.sink.play_all()

    await asyncio.wait_for(listen(), 120)


async def test_a_real_call_shows_the_callers_and_the_agents_words_and_the_agents_state(
    hub: Hub, desk: Desk
) -> None:
    factory = default_voice_stacks()
    await factory.prepare([desk])
    room = StandInRoom(AGENT)
    agent = room.local_participant
    words = spoken("could you research heat pumps for me please", rate=RATE)
    async with serving(
        DeskJob(CallLifecycle(hub, {}, factory), desk, room, CallLoad(2), number_key=NUMBER_KEY)
    ):
        room.join("alice")
        await room.changes.wait_for(lambda: room.audio, timeout=60)
        audio = room.audio[0]
        await listen_until(room, audio, lambda: bool(agent.transcripts(AGENT)))  # the greeting

        frame = frame_bytes(RATE)
        speech = words + bytes(2 * RATE)  # then a second of silence: the turn ends
        for start in range(0, len(speech), frame):
            audio.speak(speech[start : start + frame])

        def caller_finished() -> bool:
            heard = agent.transcripts("alice")
            return bool(heard) and heard[-1].attributes[ATTRIBUTE_FINAL] == "true"

        await room.changes.wait_for(caller_finished, timeout=120)
        await listen_until(room, audio, lambda: len(agent.transcripts(AGENT)) >= 2)

    heard = agent.transcripts("alice")
    final = heard[-1]
    assert "research" in final.text.lower() or "heat" in final.text.lower(), final.text
    for stream in heard:  # RoomIO's user output: the caller's track, one segment
        assert stream.topic == TOPIC_TRANSCRIPTION
        assert stream.attributes[ATTRIBUTE_TRACK_ID] == microphone_track("alice")
        assert stream.attributes[ATTRIBUTE_SEGMENT_ID] == final.attributes[ATTRIBUTE_SEGMENT_ID]
        assert stream.trailer == {}
    assert [s.attributes[ATTRIBUTE_FINAL] for s in heard][-1] == "true"
    assert all(s.attributes[ATTRIBUTE_FINAL] == "false" for s in heard[:-1])

    reply = agent.transcripts(AGENT)[1]
    assert reply.text.strip()
    assert_agent_segment(reply)
    states = [change["lk.agent.state"] for change in agent.attribute_changes]
    assert {"listening", "thinking", "speaking"} <= set(states), states
