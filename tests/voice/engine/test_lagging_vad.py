"""The engine takes only speech boundaries from a VAD of ours, and still waits for one that
lags behind the caller's audio.

A VAD stream of ours builds no INFERENCE_DONE event per window for the engine
(`BoundaryEvents`): it says how far it analysed in `analysed_seconds`. A turn must not end
on a silence the VAD has not analysed yet (a burst, a loaded machine), so the engine holds
the commit while the VAD lags and commits soon after it caught up, although no event says
so. The real pipeline session (WebRTC VAD, Piper) on a virtual clock."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import PipelineVoiceSession
from voicehub.voice.engine.tick_gate import GateSettings
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline import PiperTTS
from voicehub.voice.providers.offline.vad import WebRtcVAD, WebRtcVADStream
from voicehub_dev.fakes.utterance_stt import UtteranceRecognizer
from voicehub_dev.fakes.voice_providers import pipeline_session

VAD_STALL_LIMIT = GateSettings().vad_stall_limit

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import vad

RATE = 16000
FRAME = frame_bytes(RATE)
TICK = 0.02
ROOM = "call-1"
WORDS = "please research solar panels"


class HeldVADStream(WebRtcVADStream):
    """WebRTC's stream, except that frames pushed while `held` wait to be decided."""

    def __init__(self, owner: WebRtcVAD) -> None:
        super().__init__(owner)
        self.held = False
        self.backlog: list[rtc.AudioFrame] = []

    def process_frame(self, frame: rtc.AudioFrame) -> None:
        if self.held:
            self.backlog.append(frame)
            return
        super().process_frame(frame)

    def catch_up(self) -> None:
        self.held = False
        backlog, self.backlog = self.backlog, []
        for frame in backlog:
            super().process_frame(frame)


class HeldVAD(WebRtcVAD):
    def stream(self) -> HeldVADStream:
        self.last = HeldVADStream(self)
        return self.last


@pytest.fixture(scope="module")
def tts() -> PiperTTS:
    piper = PiperTTS(sample_rate=22050)
    piper.prewarm()
    return piper


@pytest.fixture(scope="module")
def speech() -> bytes:
    pcm = spoken(WORDS, rate=RATE)
    return pcm + bytes(-len(pcm) % FRAME)


class Call:
    def __init__(self, clock: VirtualClock, session: PipelineVoiceSession, vad: HeldVAD) -> None:
        self.clock, self.session, self.vad = clock, session, vad
        self.vad_events: list[vad.VADEventType] = []

    async def push(self, pcm: bytes) -> None:
        """`pcm` frame by frame, 20 ms of hub time each."""
        for start in range(0, len(pcm), FRAME):
            await self.session.push_audio(pcm[start : start + FRAME])
            await settle()
            await self.clock.advance(TICK)

    async def let_time_pass(self, seconds: float) -> None:
        for _ in range(round(seconds / TICK)):
            await self.clock.advance(TICK)
            await settle()


@pytest.fixture
async def call(tts: PiperTTS) -> AsyncIterator[Call]:
    clock = VirtualClock()
    async with Hub(clock=clock) as hub:
        await hub.create_room(ROOM, orchestration=None)
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback="Go on."))
        transport = MemoryTransport(RATE, ack="immediate")
        held_vad = HeldVAD()
        session = pipeline_session(
            hub,
            ROOM,
            agent,
            transport,
            stt=UtteranceRecognizer(WORDS),
            vad=held_vad,
            tts=tts,
            reply_gate=lambda: False,  # the caller's turns only: no reply to wait for
        )
        transport.session = session
        the_call = Call(clock, session, held_vad)
        on_vad = session.turns.on_vad

        def seen(event: vad.VADEvent) -> None:
            the_call.vad_events.append(event.type)
            on_vad(event)

        session.turns.on_vad = seen  # type: ignore[method-assign]
        await session.start()
        try:
            yield the_call
        finally:
            await session.aclose()


async def test_the_engine_takes_only_speech_boundaries_from_our_vad(
    call: Call, speech: bytes
) -> None:
    await call.push(bytes(25 * FRAME) + speech + bytes(50 * FRAME))
    await call.let_time_pass(3.0)
    assert call.vad_events == [vad.VADEventType.START_OF_SPEECH, vad.VADEventType.END_OF_SPEECH]
    assert call.session.engine.committed == 1
    assert call.vad.last.analysed_seconds == pytest.approx(call.session.caller.seconds)


async def test_a_lagging_vad_holds_the_turn_until_it_caught_up(call: Call, speech: bytes) -> None:
    # the VAD ends the speech on time, then falls behind for the rest of the pause
    await call.push(bytes(25 * FRAME) + speech + bytes(20 * FRAME))
    assert call.vad_events[-1:] == [vad.VADEventType.END_OF_SPEECH]
    call.vad.last.held = True
    await call.push(bytes(60 * FRAME))
    await call.let_time_pass(VAD_STALL_LIMIT - 2.0)  # lagging, not stalled
    assert call.session.engine.committed == 0
    call.vad.last.catch_up()  # quiet audio: no event says it caught up
    await call.let_time_pass(0.1)
    assert call.session.engine.committed == 1
