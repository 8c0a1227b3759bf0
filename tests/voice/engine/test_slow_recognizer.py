"""A recognizer far behind the caller (a loaded machine) holds the turn until its final:
the turn is not committed on `final_timeout` while a recognizer stream of ours says it still
owes the flush a final (`finals_owed`), so the words are answered once, as one turn. A
recognizer that never answers holds it at most `RECOGNIZER_WAIT_LIMIT` more.

The real pipeline session (Silero VAD, Piper) on a virtual clock, with a recognizer of whole
utterances whose decoding the test releases."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import EventKind
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.engine.tick_gate import GateSettings
from voicehub.voice.events import UserState
from voicehub.voice.providers.offline import PiperTTS, load_vad
from voicehub_dev.fakes.utterance_stt import UtteranceRecognizer
from voicehub_dev.fakes.voice_providers import pipeline_session

RECOGNIZER_WAIT_LIMIT = GateSettings().recognizer_wait_limit

RATE = 16000
FRAME = frame_bytes(RATE)
TICK = 0.02
ROOM = "call-1"
WORDS = "please research solar panels"


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    tts = PiperTTS(sample_rate=22050)
    tts.prewarm()
    return {"tts": tts, "vad": load_vad("silero")}


@pytest.fixture(scope="module")
def speech() -> bytes:
    pcm = spoken(WORDS, rate=RATE)
    return pcm + bytes(-len(pcm) % FRAME)


class Call:
    def __init__(
        self, clock: VirtualClock, hub: Hub, session: PipelineVoiceSession, stt: UtteranceRecognizer
    ) -> None:
        self.clock, self.hub, self.session, self.recognizer = clock, hub, session, stt
        self.transport: MemoryTransport = session.transport  # type: ignore[assignment]

    async def say(self, pcm: bytes) -> None:
        """`pcm` then a second of silence, frame by frame, 20 ms of hub time each; then
        (real time) until the VAD heard the caller stop."""
        audio = bytes(25 * FRAME) + pcm + bytes(50 * FRAME)
        for start in range(0, len(audio), FRAME):
            await self.session.push_audio(audio[start : start + FRAME])
            await settle()
            await self.clock.advance(TICK)
        await self.transport.wait_for(
            lambda: [e.state for e in self.transport.events_of(UserState)][-1:] == ["listening"]
        )

    async def let_time_pass(self, seconds: float) -> None:
        for _ in range(round(seconds / 0.1)):
            await self.clock.advance(0.1)
            await settle()

    async def caller_turns(self) -> list[str]:
        history = await self.hub.history(ROOM)
        return [e.text for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"]


@pytest.fixture
async def call(models: dict[str, Any]) -> AsyncIterator[Call]:
    clock = VirtualClock()
    async with Hub(clock=clock) as hub:
        await hub.create_room(ROOM, orchestration=None)
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback="Go on."))
        transport = MemoryTransport(RATE, ack="immediate")
        recognizer = UtteranceRecognizer(WORDS, held=True)
        session = pipeline_session(
            hub,
            ROOM,
            agent,
            transport,
            stt=recognizer,
            vad=models["vad"],
            tts=models["tts"],
            reply_gate=lambda: False,  # the caller's turns only: no reply to wait for
        )
        transport.session = session
        await session.start()
        try:
            yield Call(clock, hub, session, recognizer)
        finally:
            recognizer.release.set()
            await session.aclose()


async def test_a_turn_waits_for_the_final_a_slow_recognizer_owes_it(
    call: Call, speech: bytes
) -> None:
    await call.say(speech)
    assert call.recognizer.decodings == 1
    await call.let_time_pass(10.0)  # far past final_timeout (2 s): the decoding still runs
    assert call.session.engine.committed == 0 and call.session.engine.caller_has_floor
    call.recognizer.release.set()
    await call.let_time_pass(1.0)
    assert call.session.engine.committed == 1
    assert await call.caller_turns() == [WORDS]


async def test_a_recognizer_that_never_answers_holds_the_turn_a_bounded_time(
    call: Call, speech: bytes
) -> None:
    await call.say(speech)
    await call.let_time_pass(2.0 + RECOGNIZER_WAIT_LIMIT + 1.0)
    assert not call.session.engine.caller_has_floor  # settled: the turn had no words
    assert call.session.engine.committed == 0
