"""The livekit pipeline session with Deepgram STT and TTS, against the fake Deepgram.

Real Piper speech goes in as 20 ms frames; Silero VAD and the Deepgram plugins (through the
real deepgram-sdk) run inside AgentSession; the fake answers with the transcript registered
for the caller's utterance and speaks the agent's replies with Piper audio.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.voice.engine.test_pipeline_session import LONG, Calls, desk_agent, said, speak
from voicehub.core.events import EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.events import ProviderError
from voicehub.voice.providers.deepgram import DeepgramEndpoint, DeepgramSTT, DeepgramTTS
from voicehub.voice.providers.offline import load_vad
from voicehub_dev.fakes.deepgram import FakeDeepgram, piper_speech
from voicehub_dev.fakes.voice_providers import pipeline_session

RATE = 16000
ROOM = "call-dg"
WORDS = "please research solar panels"


@pytest.fixture(scope="module")
def vad() -> Any:
    return load_vad("silero")


@pytest.fixture
async def fake() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram() as server:
        yield server


class DeepgramCall:
    def __init__(self, hub: Hub, fake: FakeDeepgram, vad: Any) -> None:
        self.hub, self.fake, self.vad = hub, fake, vad
        self.calls = Calls()
        self.session: PipelineVoiceSession | None = None

    async def start(self, **options: Any) -> tuple[PipelineVoiceSession, MemoryTransport]:
        endpoint = DeepgramEndpoint(api_key=self.fake.api_key, base_url=self.fake.url)
        research, _ = self.calls.tools()
        transport = MemoryTransport(RATE, ack=options.pop("ack", "immediate"))
        session = pipeline_session(
            self.hub,
            ROOM,
            desk_agent(research),
            transport,
            stt=DeepgramSTT(endpoint=endpoint, sample_rate=RATE, keyterms=("solar",)),
            tts=DeepgramTTS(endpoint=endpoint, sample_rate=RATE),
            vad=self.vad,
            **options,
        )
        transport.session = session
        self.session = session
        await session.start()
        return session, transport


@pytest.fixture
async def call(fake: FakeDeepgram, vad: Any) -> AsyncIterator[DeepgramCall]:
    async with Hub() as hub:
        await hub.create_room(ROOM, orchestration=None)
        harness = DeepgramCall(hub, fake, vad)
        yield harness
        if harness.session is not None:
            await harness.session.aclose()


async def test_research_by_voice_with_deepgram(call: DeepgramCall, fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    session, transport = await call.start()
    await speak(session, spoken(WORDS, rate=RATE))
    await said(transport, "Here is what I found")

    [(topic, _)] = call.calls.research
    assert topic == WORDS
    history = await call.hub.history(ROOM)
    [user] = [e for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"]
    assert user.text == WORDS
    # Deepgram heard the turn on one socket, ended by AgentSession's flush -> Finalize
    [listen] = fake.listens
    assert "Finalize" in listen.controls and listen.params.keyterms == ("solar",)
    # and spoke both replies over one speak socket, a Flush per sentence
    speak_texts = [m["text"] for s in fake.speaks for m in s.messages if m["type"] == "Speak"]
    assert "Let me look into that." in speak_texts
    assert any(text.startswith("Here is what I found") for text in speak_texts)
    assert len(fake.speaks) == 1
    assert transport.seconds_of_audio > 2.0


@pytest.mark.slow
async def test_barge_in_clears_the_deepgram_voice(call: DeepgramCall, fake: FakeDeepgram) -> None:
    fake.speak_pace = 0.5  # the reply streams at twice real time: still going when cut
    fake.transcripts.append(WORDS)
    session, transport = await call.start(ack="manual")
    speaking = asyncio.create_task(session.say(LONG))
    await transport.wait_for(lambda: transport.chunks >= 1)  # its first audio is out
    await speak(session, spoken(WORDS, rate=RATE))
    assert await asyncio.wait_for(speaking, 20) is InjectOutcome.INTERRUPTED
    first, second = LONG.split(". ", 1)
    # the length of the whole reply as the fake speaks it (its own Piper)
    whole = len(piper_speech(first + ".", RATE)) + len(piper_speech(second, RATE))
    assert fake.speaks[0].audio_bytes < whole  # cut while the reply was still streaming
    await fake.wait_for(lambda: any({"type": "Clear"} in s.messages for s in fake.speaks))
    assert transport.clears >= 1
    # the caller's words still get their answer
    transport.ack_mode = "immediate"
    transport.ack()
    await said(transport, "Let me look into that.")
    assert call.calls.research


async def test_a_dropped_socket_mid_utterance_loses_nothing(
    call: DeepgramCall, fake: FakeDeepgram
) -> None:
    fake.transcripts.append(WORDS)
    fake.drop_listen_after = 0.9  # seconds into the audio: mid-utterance
    session, transport = await call.start()
    await speak(session, spoken(WORDS, rate=RATE))
    await said(transport, "Here is what I found")
    [(topic, _)] = call.calls.research
    assert topic == WORDS
    assert [s.dropped for s in fake.listens] == [True, False]
    [fault] = transport.events_of(ProviderError)
    assert fault.source == "stt_error" and fault.recoverable is True
    history = await call.hub.history(ROOM)
    assert any(e.kind is EventKind.SYSTEM and "reconnecting" in e.text for e in history)
