"""Caller frames reach livekit's VAD and STT streams directly (no task hop per frame), and
a call still hears, transcribes and answers as before."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

from tests.fakes.memory_transport import FakeTransport
from tests.voice.test_livekit_session import (
    RATE,
    ROOM,
    Calls,
    RecordingActivity,
    desk_agent,
    speak,
    until,
)
from voicehub.hub import Hub
from voicehub.voice.events import Transcript, UserState
from voicehub.voice.livekit_feed import DirectChan
from voicehub.voice.livekit_session import LiveKitVoiceSession
from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad, synthesize
from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    stt = PocketSphinxSTT()
    stt.prewarm()
    tts = PiperTTS(sample_rate=RATE)
    tts.prewarm()
    speech = synthesize("please research solar panels", voice="piper", sample_rate=RATE)
    return {"stt": stt, "tts": tts, "vad": BatchedSileroVAD(load_vad("silero")), "speech": speech}


async def test_items_go_straight_through_unless_something_waits() -> None:
    taken: list[int] = []
    open_ = True

    def push(item: int) -> bool:
        if open_:
            taken.append(item)
        return open_

    chan = DirectChan(push)
    chan.send_nowait(1)
    open_ = False
    chan.send_nowait(2)  # cannot be taken: queued
    open_ = True
    chan.send_nowait(3)  # 2 waits: 3 queues behind it, in order
    assert taken == [1] and chan.direct == 1
    assert [chan.recv_nowait(), chan.recv_nowait()] == [2, 3]
    chan.send_nowait(4)  # nothing waits any more
    assert taken == [1, 4] and chan.direct == 2


async def test_a_call_feeds_vad_and_stt_directly_and_is_answered(stack: dict[str, Any]) -> None:
    async with Hub() as hub:
        await hub.create_room(ROOM, orchestration=None)
        research, _ = Calls().tools()
        transport = FakeTransport(RATE, ack="immediate")
        activity = RecordingActivity(hub.clock)
        session = LiveKitVoiceSession(
            hub,
            ROOM,
            desk_agent(research),
            transport,
            stt=stack["stt"],
            vad=stack["vad"].for_call(),
            tts=stack["tts"],
            activity=activity,
        )
        transport.session = session
        await session.start()
        try:
            await _call_is_answered(session, transport, activity, stack["speech"])
        finally:
            await session.aclose()


async def _call_is_answered(
    session: LiveKitVoiceSession,
    transport: FakeTransport,
    activity: RecordingActivity,
    caller_speech: bytes,
) -> None:
    await speak(session, caller_speech)
    await transport.wait_for(
        lambda: any("solar" in e.text for e in transport.events_of(Transcript) if e.role == "user")
    )
    await transport.wait_for(lambda: len(transport.marks) >= 1)  # the agent answered
    await until(activity, lambda s: s.is_idle)
    assert [e.state for e in transport.events_of(UserState)][:2] == ["speaking", "listening"]

    assert session._feed.wired == {"vad": 1, "stt": 1}
    recognition = session.agent_session._activity._audio_recognition  # type: ignore[union-attr]
    vad_chan, stt_chan = recognition._vad_ch, recognition._stt_pipeline._audio_ch
    assert isinstance(vad_chan, DirectChan) and isinstance(stt_chan, DirectChan)
    # Every frame after the wiring reached both streams, straight through or, while
    # something waited in a channel (a loaded loop), queued in order for livekit's task.
    # Frames before the wiring took livekit's own hop: how many depends on the load (the
    # stream must exist and livekit's channel be drained), as does how many queue;
    # `test_items_go_straight_through_unless_something_waits` covers the rule exactly.
    feed = session._feed
    for name, chan in (("vad", vad_chan), ("stt", stt_chan)):
        assert chan.direct + chan.queued >= feed.frames - feed.wired_at[name]
        assert chan.direct >= 1
