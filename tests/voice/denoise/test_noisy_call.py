"""A phone call from a car on the real pipeline session (Silero VAD, Piper) with RNNoise as
the caller's intake, on a virtual clock: the car is not taken for the caller (a result is
spoken over it whole, never paused), and the recognizer hears the caller's words as the line
carried them, while the VAD heard them denoised (committed fixtures, tests/data/denoise).

The test pushes the caller's audio frame by frame and moves the hub's clock 20 ms per frame.
Caller turns get no reply (`reply_gate`), so every byte of agent audio is the result's. The
recognizer keeps what it was given (a non-streaming livekit STT: the engine hands it each
utterance at the VAD's end of speech)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.policy import WaitForIdle
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes, read_wav
from voicehub.voice.denoise.stream import RNNoiseFilter
from voicehub.voice.engine.session import CallAgent, CallSpeech, PipelineVoiceSession
from voicehub.voice.events import UserState
from voicehub.voice.providers.offline import PiperTTS, load_vad

DATA = Path(__file__).resolve().parents[2] / "data" / "denoise"
RATE = 8000
FRAME = frame_bytes(RATE)
TICK = 0.02
ROOM = "car-call"
VAD_WINDOW = 0.04  # Silero judges 32 ms windows: the latest may wait for the next frame
RESULT = "Your solar report is ready: panels got cheaper again this year."


def fixture_frames(name: str) -> list[bytes]:
    pcm = read_wav(DATA / name).pcm16
    return [pcm[i : i + FRAME] for i in range(0, len(pcm) - FRAME + 1, FRAME)]


class KeepingSTT:
    """A non-streaming livekit STT that keeps the audio of each utterance it is given."""

    def __init__(self) -> None:
        from livekit.agents import stt, utils

        heard: list[bytes] = []

        class Recognizer(stt.STT):
            def __init__(self) -> None:
                super().__init__(
                    capabilities=stt.STTCapabilities(streaming=False, interim_results=False)
                )

            async def _recognize_impl(
                self, buffer: utils.AudioBuffer, **kwargs: Any
            ) -> stt.SpeechEvent:
                heard.append(utils.merge_frames(buffer).data.tobytes())
                return stt.SpeechEvent(
                    type=stt.SpeechEventType.FINAL_TRANSCRIPT,
                    alternatives=[stt.SpeechData(language="en", text="")],
                )

        self.stt = Recognizer()
        self.heard = heard


@dataclass
class Call:
    hub: Hub
    clock: VirtualClock
    session: PipelineVoiceSession
    transport: MemoryTransport
    recognizer: KeepingSTT
    outcomes: list[str]

    async def push(self, frame: bytes) -> None:
        """One caller frame; once the VAD has judged it (it runs on its own thread, in real
        time, as on a call that keeps pace), 20 ms of hub time."""
        await self.session.push_audio(frame)
        await settle()
        vad, caller = self.session.turns.vad, self.session.caller
        assert vad is not None
        await until(
            lambda: (vad.analysed_seconds or 0.0) >= caller.seconds - VAD_WINDOW,
            what="the VAD's verdict on the frame",
            poll=0.001,
        )
        await self.clock.advance(TICK)


@pytest.fixture(scope="module")
def tts() -> Any:
    voice = PiperTTS(sample_rate=22050)
    voice.prewarm()
    return voice


async def open_call(tts: Any, *, denoise: bool) -> AsyncIterator[Call]:
    clock = VirtualClock()
    async with Hub(clock=clock) as hub:
        await hub.create_room(ROOM, orchestration=None)
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback="Go on."))
        transport = MemoryTransport(RATE, ack="immediate")
        recognizer = KeepingSTT()
        speech = CallSpeech(
            recognizer.stt,
            tts,
            load_vad("silero"),
            caller_filter=RNNoiseFilter(RATE) if denoise else None,
        )
        session = PipelineVoiceSession(
            hub, ROOM, CallAgent(agent, reply_gate=lambda: False), transport, speech
        )
        transport.session = session
        call = Call(hub, clock, session, transport, recognizer, [])

        @hub.hook(HookTrigger.AFTER_DELIVER)
        async def settled(event: Event, ctx: HookContext) -> None:
            call.outcomes.append(event.metadata["outcome"])

        await session.start()
        try:
            yield call
        finally:
            await session.aclose()


@pytest.fixture
async def car_call(tts: Any) -> AsyncIterator[Call]:
    async for call in open_call(tts, denoise=True):
        yield call


@pytest.fixture
async def car_call_as_heard(tts: Any) -> AsyncIterator[Call]:
    async for call in open_call(tts, denoise=False):
        yield call


async def noise_while_a_result_waits(call: Call, seconds: float) -> None:
    """A result for the caller, and car noise on the line meanwhile: for `seconds`, or
    until the result's outcome is known."""
    car = fixture_frames("car_8k.wav")
    await call.hub.deliver(ROOM, RESULT, strategy=WaitForIdle(buffer=0.3))
    for i in range(round(seconds / TICK)):
        await call.push(car[i % len(car)])
        if call.outcomes:
            break


async def test_a_result_is_spoken_whole_over_car_noise(car_call: Call) -> None:
    call = car_call
    await noise_while_a_result_waits(call, 15.0)
    assert call.outcomes == ["delivered"]
    assert call.transport.clears == 0, "the car noise paused the result"
    # nothing of the car was taken for the caller: no speech-like frame (which holds a
    # result back and pauses the agent), no VAD turn (which cuts the agent off)
    assert call.session.activity.caller_voiced_at is None
    assert "speaking" not in [e.state for e in call.transport.events_of(UserState)]
    assert call.recognizer.heard == []  # no turn: nothing to recognize


async def test_without_denoise_the_car_holds_the_result_back(car_call_as_heard: Call) -> None:
    # the control: heard as sent, the car noise is the caller speaking to the speech
    # evidence (for its first 2.8 s: it then learns the noise floor), so a result waiting
    # for a quiet moment gets none
    call = car_call_as_heard
    await noise_while_a_result_waits(call, 2.8)
    assert call.session.activity.caller_voiced_at is not None
    assert call.outcomes == [] and not call.transport.audio


async def test_the_recognizer_hears_the_callers_words_as_the_line_carried_them(
    car_call: Call,
) -> None:
    call = car_call
    car, request = fixture_frames("car_8k.wav"), fixture_frames("request_car_0db_8k.wav")
    sent = car + request + [bytes(FRAME)] * 50
    for frame in sent:
        await call.push(frame)
    await until(lambda: call.recognizer.heard, what="the utterance recognized", clock=call.clock)
    states = [e.state for e in call.transport.events_of(UserState)]
    assert states.count("speaking") == 1  # the words, once; not the car before them
    (utterance,) = call.recognizer.heard
    assert len(utterance) >= FRAME * 75  # the words' 1.5 s at least
    assert utterance in b"".join(sent)  # the caller's own samples, not RNNoise's
    words = b"".join(request[30:100])
    assert words in utterance
