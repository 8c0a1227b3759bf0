"""A result being spoken when its call is handed over (a drain) is never counted as heard
from acks that do not cover its last frame (issue 38).

The real pipeline session and speech player, with the delivery service of two instances
("b" drains, "c" takes the call up) on one store and a virtual clock; the voice is
`FakeTTS` (silence of a fixed length), the line an in-memory transport whose marks the test
acks by hand, as a caller's buffer would once it played them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.delivery.policy import WaitForIdle
from voicehub.delivery.service import DeliveryService
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.speech_player import SpeechPlayer
from voicehub.voice.providers.offline import load_vad
from voicehub_dev.fakes.voice_providers import FakeSTT, FakeTTS, pipeline_session

RATE = 16000
ROOM = "call-1"
RESULT = "The heat pump report is ready. Heat pumps cut heating bills, the model says."
WAIT = WaitForIdle(buffer=0.5)


@dataclass
class Instance:
    hub: Hub
    session: PipelineVoiceSession
    line: MemoryTransport

    async def record(self, delivery_id: str) -> DeliveryRecord:
        record = await self.hub.store.get_delivery(delivery_id)
        assert record is not None
        return record

    async def hand_over(self) -> None:
        """What a drain does to the call here: no result starts any more, then the call
        ends (the switchboard's clean-up: the room's results held, the session closed)."""
        self.hub.delivery.hand_over_results()
        await self.hub.delivery.detach(ROOM)
        await self.session.aclose()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def instances(clock: VirtualClock) -> AsyncIterator[dict[str, Instance]]:
    """Instances "b" and "c" on one store; each with its own call session of ROOM."""
    vad = load_vad("webrtc")
    store = MemoryStore()  # what the instances share (Redis, in production)
    made: dict[str, Instance] = {}
    for owner in ("b", "c"):
        hub = Hub(clock=clock, store=store)
        hub.delivery = DeliveryService(hub, default_strategy=WAIT, wall=clock.now, owner=owner)
        await hub.start()
        await hub.create_room(ROOM, orchestration=None)
        line = MemoryTransport(RATE, ack="manual", clock=clock)
        session = pipeline_session(
            hub,
            ROOM,
            Agent(id="desk", llm=ScriptedLLM([], fallback="Go on.")),
            line,
            stt=FakeSTT(),
            tts=FakeTTS(sample_rate=RATE, seconds=2.0),
            vad=vad,
            reply_gate=lambda: False,  # no replies: every byte of agent audio is the result's
        )
        line.session = session
        made[owner] = Instance(hub, session, line)
    try:
        yield made
    finally:
        for instance in made.values():
            await instance.session.aclose()
            await instance.hub.aclose()


async def until_marked(clock: VirtualClock, line: MemoryTransport, count: int) -> None:
    """Move the clock on (the result's wait for idle) until `count` marks went out."""
    for _ in range(200):
        if len(line.marks) >= count:
            return
        await clock.advance(0.1)
        await asyncio.sleep(0.005)  # the pre-rendering runs in a task of its own
    raise AssertionError(f"{len(line.marks)} marks, not {count}: {line.marks}")


async def test_a_result_cut_by_a_hand_over_is_held_and_the_next_instance_speaks_it_whole(
    clock: VirtualClock, instances: dict[str, Instance]
) -> None:
    b, c = instances["b"], instances["c"]
    await b.session.start()
    delivery_id = await b.hub.delivery.deliver(ROOM, RESULT)
    await until_marked(clock, b.line, 1)
    [old_mark] = b.line.marks  # its last frame went out; the caller's buffer still plays it
    sent_on_b = len(b.line.audio)
    assert (await b.record(delivery_id)).status is DeliveryStatus.DELIVERING

    await b.hand_over()  # the drain's deadline: the line closes before the caller's ack
    cut = await b.record(delivery_id)
    assert (cut.status, cut.attempts) == (DeliveryStatus.HELD, 1)  # not `delivered`
    assert b.line.acked == []

    await c.session.start()  # the caller is back, on the next instance
    await until_marked(clock, c.line, 1)
    [new_mark] = c.line.marks
    # the old line's ack reaches the new one (a client that sends what it owed): not heard
    c.session.playout_confirmed(old_mark)
    await settle()
    assert (await c.record(delivery_id)).status is DeliveryStatus.DELIVERING
    assert new_mark != old_mark  # each session's marks are its own
    assert len(c.line.audio) == sent_on_b  # spoken again from its start, to its end

    c.line.ack(new_mark)  # the caller heard its last frame
    await clock.advance(0.1)

    async def delivered() -> bool:
        return (await c.record(delivery_id)).status is DeliveryStatus.DELIVERED

    await until(delivered, what="the result recorded delivered")
    done = await c.record(delivery_id)
    assert (done.status, done.attempts) == (DeliveryStatus.DELIVERED, 2)


async def test_two_sessions_of_one_room_never_share_a_speech_id(
    clock: VirtualClock, instances: dict[str, Instance]
) -> None:
    b, c = instances["b"], instances["c"]
    ids_b = {b.session._new_speech_id() for _ in range(5)}
    ids_c = {c.session._new_speech_id() for _ in range(5)}
    assert len(ids_b) == len(ids_c) == 5
    assert not ids_b & ids_c
    assert all(i.startswith(f"{ROOM}/speech-") for i in ids_b | ids_c)


async def test_an_ack_before_a_speech_s_mark_went_out_does_not_end_it(
    clock: VirtualClock,
) -> None:
    # A client's early ack of the id now playing (or a stale one that happens to share it)
    # must not count the speech heard while its last frames are still to come.
    line = MemoryTransport(RATE, ack="manual", clock=clock)
    activity = VoiceActivity(clock)
    player = SpeechPlayer(line, activity, clock)
    more = asyncio.Event()

    async def audio() -> AsyncIterator[bytes]:
        yield bytes(3200)  # 0.1 s
        await more.wait()  # the rest is still being synthesized
        yield bytes(3200)

    speech = Speech(f"{ROOM}/speech-x-1", "delivery", RESULT, audio())
    player.start()
    player.play(speech)
    try:
        await line.wait_for(lambda: line.chunks == 1)
        player.confirm(speech.mark_id)  # before its mark: ignored
        await settle()
        assert not speech.done
        more.set()
        await line.wait_for(lambda: line.marks == [speech.mark_id])
        player.confirm(speech.mark_id)  # the line's ack, once it played the last frame
        assert await asyncio.wait_for(speech.wait(), 5) is SpeechEnd.PLAYED
        assert speech.heard_seconds == pytest.approx(0.2)
    finally:
        await player.aclose()
