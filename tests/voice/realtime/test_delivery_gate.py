"""The realtime session's last check before a delivery's first audio frame: the caller's
per-frame speech evidence (in `VoiceActivity`) holds the result when a speech-like frame
came within `VOICE_HOLD`, before the model's VAD has said anything.

The fake model's VAD is made deaf here (a threshold no voice reaches): the real API's
server VAD decides 60 ms to hundreds of ms after the first voiced frame, and this check is
what covers that window. Time runs on a virtual clock: each caller frame is 20 ms of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from tests.support.speech import spoken
from tests.voice.realtime.test_session import FRAME, RATE, ROOM, Harness, brain
from voicehub.core.clock import VirtualClock
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import VOICE_HOLD
from voicehub.hub import Hub
from voicehub_dev.fakes.openai_realtime import FakeRealtimeServer

RESULT = "The heat pump research is done: the air source models came out best."


@pytest.fixture(scope="module")
def caller_frames() -> list[bytes]:
    """The caller's words as 20 ms frames, from the first loud one."""
    pcm = spoken("wait, one more question about my order", rate=RATE)
    frames = [pcm[i : i + FRAME] for i in range(0, len(pcm) // FRAME * FRAME, FRAME)]
    level = [np.sqrt(np.mean(np.frombuffer(f, "<i2").astype(np.float64) ** 2)) for f in frames]
    first = next(i for i, rms in enumerate(level) if rms > 1000)
    return frames[first:]


@pytest.fixture
async def call() -> AsyncIterator[Harness]:
    deaf = FakeRealtimeServer(brain, energy_threshold=1e9)
    async with deaf as server, Hub(clock=VirtualClock()) as hub:
        await hub.create_room(ROOM, orchestration=None)
        harness = Harness(hub, server)
        yield harness
        for session in harness.sessions:
            await session.aclose()


async def caller_says(call: Harness, frames: list[bytes]) -> None:
    session, clock = call.sessions[-1], call.hub.clock
    assert isinstance(clock, VirtualClock)
    for frame in frames:
        await session.push_audio(frame)
        await clock.advance(0.02)


@pytest.mark.parametrize("frames_before", [1, 2, 5])
async def test_a_caller_who_started_frames_before_the_decision_is_never_talked_over(
    call: Harness, caller_frames: list[bytes], frames_before: int
) -> None:
    session, transport, _ = await call.start(ack="immediate")
    await caller_says(call, caller_frames[:frames_before])
    outcome = await session.inject(RESULT, allow_interrupt=False, metadata={})
    assert outcome is InjectOutcome.DEFERRED  # held for the next gap, not used up
    assert not transport.audio  # not one frame went out
    # the model forgets what nobody heard: its response cancelled, the item cut to nothing
    await call.server.wait_for(lambda: bool(call.server.of_type("conversation.item.truncate")))
    assert call.server.of_type("response.cancel")
    assert [e["audio_end_ms"] for e in call.server.of_type("conversation.item.truncate")] == [0]
    assert not session.activity.snapshot().agent_speaking


async def test_a_quiet_caller_hears_the_result(call: Harness) -> None:
    session, transport, _ = await call.start(ack="immediate")
    await caller_says(call, [bytes(FRAME)] * 10)  # line silence is no evidence
    outcome = await session.inject(RESULT, allow_interrupt=False, metadata={})
    assert outcome is InjectOutcome.FINISHED
    assert transport.audio and not call.server.of_type("conversation.item.truncate")


async def test_once_the_caller_has_been_quiet_for_the_hold_the_result_plays(
    call: Harness, caller_frames: list[bytes]
) -> None:
    session, transport, _ = await call.start(ack="immediate")
    await caller_says(call, caller_frames[:5])
    assert await session.inject(RESULT, allow_interrupt=False, metadata={}) == "deferred"
    quiet = round(VOICE_HOLD / 0.02) + 1
    await caller_says(call, [bytes(FRAME)] * quiet)
    outcome = await session.inject(RESULT, allow_interrupt=False, metadata={})
    assert outcome is InjectOutcome.FINISHED and transport.audio


async def test_a_playing_result_stops_at_the_callers_first_voiced_frame(
    call: Harness, caller_frames: list[bytes]
) -> None:
    session, transport, _ = await call.start(ack="manual")
    spoken = asyncio.create_task(session.inject(RESULT, allow_interrupt=False, metadata={}))
    await transport.wait_for(lambda: len(transport.marks) >= 2)  # 200 ms of it sent
    transport.ack(transport.marks[0])  # the caller has heard the first 100 ms
    await session.push_audio(caller_frames[0])
    assert transport.clears == 1  # within the frame, before the model's VAD could say a word
    assert await spoken is InjectOutcome.INTERRUPTED  # offered again at the next gap
    await call.server.wait_for(lambda: bool(call.server.of_type("conversation.item.truncate")))
    assert [e["audio_end_ms"] for e in call.server.of_type("conversation.item.truncate")] == [100]


async def test_an_ordinary_reply_waits_for_the_models_vad(
    call: Harness, caller_frames: list[bytes]
) -> None:
    session, transport, _ = await call.start(ack="manual")
    reply = asyncio.create_task(session.say("Hello, how can I help you today?"))
    await transport.wait_for(lambda: bool(transport.marks))
    await session.push_audio(caller_frames[0])  # a backchannel does not cut the agent
    assert transport.clears == 0
    transport.ack_mode = "immediate"  # the rest of it plays out
    transport.ack()
    assert await reply is InjectOutcome.FINISHED
