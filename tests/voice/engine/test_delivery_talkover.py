"""Never over the caller (issue 15): frame-level gating, yielding at once, pre-rendering and
the offer, on the real pipeline session (Silero, PocketSphinx, Piper) with the delivery
service on a virtual clock.

The test pushes the caller's audio frame by frame and moves the hub's clock 20 ms per frame,
so "the decision" is an exact frame: with `WaitForIdle(1.0)` and the room idle since t=0,
the driver decides at t=1.0. Caller turns get no reply (`reply_gate`), so every byte of agent
audio at the transport is the result's. The engine's turn timing runs on the same clock; the
recognizer can be handed a transcript at any moment (`InjectableSTT`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookResult, HookTrigger
from voicehub.core.store.base import DeliveryStatus
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import VOICE_HOLD, WaitForIdle
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import EngineOptions, PipelineVoiceSession
from voicehub.voice.engine.turn_engine import TurnEngineSettings
from voicehub.voice.events import Transcript, UserState
from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad
from voicehub_dev.fakes.injectable_stt import InjectableSTT, final
from voicehub_dev.fakes.voice_providers import pipeline_session

RATE = 16000
FRAME = frame_bytes(RATE)
TICK = 0.02
ROOM = "call-1"
RESULT = "Your solar report is ready: panels got cheaper again this year."
SILENCE = bytes(FRAME)


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    stt = PocketSphinxSTT()
    stt.prewarm()
    tts = PiperTTS(sample_rate=22050)
    tts.prewarm()
    return {"stt": stt, "tts": tts, "vad": load_vad("silero")}


@pytest.fixture(scope="module")
def caller_frames() -> list[bytes]:
    """The caller's words as 20 ms frames, from the first voiced one."""
    pcm = spoken("wait, one more question about my order", rate=RATE)
    pcm += bytes(-len(pcm) % FRAME)
    frames = [pcm[i : i + FRAME] for i in range(0, len(pcm), FRAME)]
    first = next(i for i, f in enumerate(frames) if _rms(f) > 1000)
    return frames[first:]


def _rms(frame: bytes) -> float:
    samples = np.frombuffer(frame, dtype="<i2").astype(np.float64)
    return float(np.sqrt(np.mean(samples * samples)))


class Harness:
    def __init__(self, hub: Hub, clock: VirtualClock, session: PipelineVoiceSession) -> None:
        self.hub, self.clock, self.session = hub, clock, session
        self.transport: MemoryTransport = session.transport  # type: ignore[assignment]
        self.outcomes: list[str] = []
        self.attempts = 0

    async def push(self, frame: bytes) -> None:
        """One caller frame, then 20 ms of hub time (the driver runs what falls due)."""
        await self.session.push_audio(frame)
        await settle()
        await self.clock.advance(TICK)

    async def outcome(self, count: int = 1) -> list[str]:
        await self.transport.wait_for(lambda: len(self.outcomes) >= count)
        return self.outcomes


@pytest.fixture
async def harness(models: dict[str, Any]) -> AsyncIterator[Harness]:
    clock = VirtualClock()
    async with Hub(clock=clock) as hub:
        await hub.create_room(ROOM, orchestration=None)
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback="Go on."))
        transport = MemoryTransport(RATE, ack="immediate")
        session = pipeline_session(
            hub,
            ROOM,
            agent,
            transport,
            stt=InjectableSTT(models["stt"]),
            vad=models["vad"],
            tts=models["tts"],
            reply_gate=lambda: False,  # caller turns get no reply: all agent audio is results
            # the recognizer answers in real time while this clock runs ahead of it: turns
            # wait for its finals, as on a live call (final_timeout is the turn engine's test)
            options=EngineOptions(turn=TurnEngineSettings(final_timeout=60.0)),
        )
        transport.session = session
        test = Harness(hub, clock, session)

        @hub.hook(HookTrigger.BEFORE_DELIVER)
        async def attempted(event: Event, ctx: HookContext) -> None:
            test.attempts += 1

        @hub.hook(HookTrigger.AFTER_DELIVER)
        async def settled(event: Event, ctx: HookContext) -> None:
            test.outcomes.append(event.metadata["outcome"])
            await transport._notify()

        await session.start()
        try:
            yield test
        finally:
            await session.aclose()


async def _idle(test: Harness) -> None:
    """Let hub time pass (a wordless caller turn ends on the engine's clock) until idle."""
    activity = test.session.activity

    async def wait() -> None:
        while not activity.snapshot().is_idle:
            await test.clock.advance(TICK)
            await asyncio.sleep(0.005)  # the VAD and recognizer threads answer in real time

    await asyncio.wait_for(wait(), 20)


async def _caller_turn_over(test: Harness) -> None:
    """Wait (real time) until the VAD has heard the caller start and stop, then let hub
    time pass until the engine has settled the turn (the recognizer answers in real time)."""
    await test.transport.wait_for(
        lambda: (
            [e.state for e in test.transport.events_of(UserState)][-2:] == ["speaking", "listening"]
        )
    )
    await _idle(test)


async def _result_playing(test: Harness) -> None:
    """Deliver the result and let it start; it keeps playing until the test acks."""
    test.transport.ack_mode = "manual"
    await test.hub.deliver(ROOM, RESULT, strategy=WaitForIdle(buffer=0.2))
    for _ in range(15):  # a 0.3 s gap: the result starts
        await test.push(SILENCE)
    await test.transport.wait_for(lambda: len(test.transport.audio) > 0)


@pytest.mark.parametrize("frames_before", [1, 2, 5])
async def test_a_caller_who_starts_frames_before_the_decision_is_never_talked_over(
    harness: Harness, caller_frames: list[bytes], frames_before: int
) -> None:
    test = harness
    await test.hub.deliver(ROOM, RESULT, strategy=WaitForIdle(buffer=1.0))
    decision_frame = round(1.0 / TICK)  # idle since t=0, buffer 1.0 s
    for _ in range(decision_frame - frames_before):
        await test.push(SILENCE)
    for frame in caller_frames:  # the decision falls inside the caller's words
        await test.push(frame)
        assert not test.transport.audio, "the result played over the caller"
        assert test.attempts == 0
    for _ in range(40):  # the VAD ends a turn after 0.35 s of silence
        await test.push(SILENCE)
    await _caller_turn_over(test)
    assert not test.transport.audio and test.attempts == 0
    # the next gap: a full buffer after the caller's turn, then the result, once
    await test.clock.advance(1.0 + VOICE_HOLD)
    assert await test.outcome() == ["delivered"]
    assert test.transport.audio and test.attempts == 1


async def test_a_result_pauses_at_the_callers_first_voiced_frame_and_a_noise_uses_nothing(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    await _result_playing(test)
    assert test.transport.clears == 0

    loud = max(caller_frames, key=_rms)
    await test.session.push_audio(loud)  # one frame of caller sound
    await settle()
    # within that frame: the transport's clear went out, the result stopped
    assert test.transport.clears == 1
    sent = len(test.transport.audio)
    await settle()
    assert len(test.transport.audio) == sent, "audio went out after the clear"
    assert not test.outcomes  # paused, not given up

    # nothing more came of it: the result goes on from a little before where it stopped
    test.transport.ack_mode = "immediate"
    for _ in range(round(0.6 / TICK)):
        await test.push(SILENCE)
    await test.transport.wait_for(lambda: len(test.transport.audio) > sent)
    assert await test.outcome() == ["delivered"] and test.attempts == 1


async def test_a_caller_who_takes_the_floor_cuts_a_result_and_hears_it_later(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    await _result_playing(test)
    await _caller_takes_the_floor(test, caller_frames)
    assert test.transport.clears >= 1
    assert await test.outcome() == ["interrupted"]
    # offered again at the next gap, and spoken in full (the interruption did not use it up)
    await _idle(test)
    test.transport.ack_mode = "immediate"
    for _ in range(round((VOICE_HOLD + 0.3) / TICK)):
        await test.push(SILENCE)
    await test.clock.advance(1.0)
    assert await test.outcome(2) == ["interrupted", "delivered"], test.outcomes


async def _caller_takes_the_floor(test: Harness, caller_frames: list[bytes]) -> None:
    """The caller says a whole sentence over the result (a turn, not an acknowledgement)."""
    for frame in caller_frames:
        await test.push(frame)
    for _ in range(round(0.8 / TICK)):
        await test.push(SILENCE)


async def test_results_are_pre_rendered_and_a_rewrite_is_spoken_instead(
    harness: Harness,
) -> None:
    test = harness
    rewritten = "Rewritten: the report is ready."

    @test.hub.hook(HookTrigger.BEFORE_DELIVER)
    async def rewrite(event: Event, ctx: HookContext) -> HookResult:
        if event.metadata.get("rewrite"):
            return HookResult(event=event.model_copy(update={"text": rewritten}))
        return HookResult()

    speaker = test.session.results
    await test.hub.deliver(ROOM, RESULT, strategy=WaitForIdle(buffer=5.0))
    await test.clock.advance(0.1)  # the driver runs: the item is prepared while it waits
    rendering = next(iter(speaker._renderings.values()))
    assert rendering.text == RESULT
    assert rendering.task is not None
    await rendering.task
    assert rendering.complete and rendering.chunks
    await test.clock.advance(5.0)
    assert await test.outcome() == ["delivered"]
    assert not speaker._renderings  # spoken: the rendering is gone

    await test.hub.deliver(ROOM, RESULT, strategy=WaitForIdle(buffer=1.0), metadata={"rewrite": 1})
    await test.clock.advance(2.0)
    assert await test.outcome(2) == ["delivered", "delivered"]
    assert not speaker._renderings
    history = [e.text for e in await test.hub.history(ROOM)]
    assert rewritten in history  # the rewritten words were spoken, not the rendering


async def _cut_off_twice_then_offered(test: Harness, caller_frames: list[bytes]) -> str:
    """Deliver a result, take the floor over it twice, and let the third attempt ask."""
    test.transport.ack_mode = "manual"
    result = await test.hub.deliver(
        ROOM, RESULT, strategy=WaitForIdle(buffer=0.2), metadata={"task": "solar panels"}
    )
    for round_ in (1, 2):  # the caller cuts it off twice
        test.transport.audio.clear()
        for _ in range(round((VOICE_HOLD + 0.3) / TICK)):
            await test.push(SILENCE)
        await test.transport.wait_for(lambda: len(test.transport.audio) > 0)
        await _caller_takes_the_floor(test, caller_frames)
        assert (await test.outcome(round_))[-1] == "interrupted"
        await _idle(test)
    test.transport.ack_mode = "immediate"
    test.transport.audio.clear()
    for _ in range(round((VOICE_HOLD + 0.3) / TICK)):
        await test.push(SILENCE)
    # a late VAD verdict on the loud frame opens no more than a wordless caller turn: it
    # cannot cut the offer (a result yields only to the caller's voice or a real turn)
    await _idle(test)
    await test.clock.advance(1.0)
    await test.transport.wait_for(
        lambda: any("shall I read" in e.text for e in test.transport.events_of(Transcript))
    )
    # The question's transcript goes out as it ends; the answer is awaited once the
    # transport confirmed its playout: an answer pushed before then would cut the question
    # off instead of answering it.
    await _offer_asked(test)
    return result


async def _offer_asked(test: Harness) -> None:
    speaker = test.session.results

    await until(lambda: speaker.offer_waiting is not None, timeout=20)


@pytest.mark.slow
async def test_a_result_cut_off_twice_is_offered_and_a_yes_reads_it(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    await _cut_off_twice_then_offered(test, caller_frames)
    await test.session.push_text("yes please")
    assert await test.outcome(3) == ["interrupted", "interrupted", "delivered"]
    spoken = [e.text for e in await test.hub.history(ROOM) if e.role == "assistant"]
    assert any("I have the results on solar panels, shall I read them?" in t for t in spoken)
    assert spoken[-1] == RESULT


async def test_an_offer_answered_no_keeps_the_result_held_for_the_next_call(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    result = await _cut_off_twice_then_offered(test, caller_frames)
    await test.session.push_text("no not now")
    assert await test.outcome(3) == ["interrupted", "interrupted", "declined"]
    record = await test.hub.store.get_delivery(result)
    assert record is not None and record.status is DeliveryStatus.HELD
    await test.clock.advance(30.0)  # not spoken again in this call
    assert test.outcomes[-1] == "declined"
    spoken = [e.text for e in await test.hub.history(ROOM) if e.role == "assistant"]
    assert RESULT not in spoken[-1]


async def test_a_late_final_transcript_does_not_cut_a_result_but_the_callers_voice_does(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    await _result_playing(test)
    test.session.stt.inject(final("wait"))  # words from before the result began, late
    await settle()
    assert test.transport.clears == 0 and not test.outcomes
    await test.session.push_audio(max(caller_frames, key=_rms))  # the caller, live
    await settle()
    assert test.transport.clears == 1  # paused at that frame
    await test.clock.advance(1.0)  # and the late words' turn, once committed, cuts it
    assert await test.outcome() == ["interrupted"]


async def test_the_agents_own_speech_still_yields_to_a_final_transcript(harness: Harness) -> None:
    test = harness
    test.transport.ack_mode = "manual"
    talking = asyncio.create_task(test.session.say(RESULT + " " + RESULT))
    await test.transport.wait_for(lambda: len(test.transport.audio) > 0)
    test.session.stt.inject(final("wait"))  # words the VAD missed: the caller took the floor
    assert await asyncio.wait_for(talking, 20) is InjectOutcome.INTERRUPTED


@pytest.mark.slow
async def test_a_spoken_turn_of_earlier_audio_does_not_answer_the_offer(
    harness: Harness, caller_frames: list[bytes]
) -> None:
    test = harness
    await _cut_off_twice_then_offered(test, caller_frames)
    speaker = test.session.results
    # a recognizer's late turn: its words were said before the question (no voice since)
    test.session.stt.inject(final("no"))
    await test.clock.advance(1.0)  # the turn commits after its endpointing delay
    assert speaker.offer_waiting is not None
    speaker.activity.caller_voiced()  # the caller speaks after the question
    test.session.stt.inject(final("yes please"))
    await test.clock.advance(1.0)
    assert await test.outcome(3) == ["interrupted", "interrupted", "delivered"]
