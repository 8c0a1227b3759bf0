"""The realtime session through the real `openai` SDK against the fake Realtime server.

The caller's words are synthesized by Piper at the transport's 16 kHz and pushed as 20 ms
frames faster than real time; the session resamples them to 24 kHz for the fake, whose
energy VAD finds the turn and whose PocketSphinx transcribes it. The fake's "brain" decides
what the model says or calls; its audio is Piper at 24 kHz. Playout is confirmed by the
in-memory transport when the test says so. Time-driven behaviour (the delivery buffer) runs
on a virtual clock; everything else waits on events.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai import AsyncOpenAI

from tests.fakes.memory_transport import AckMode, FakeTransport
from tests.fakes.openai_realtime import Call, FakeRealtimeServer, Say, Turn
from tests.voice.test_livekit_session import RecordingActivity
from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool, ToolContext, tool
from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import WaitForIdle
from voicehub.hub import Hub
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity
from voicehub.voice.audio import frame_bytes
from voicehub.voice.providers.offline import synthesize
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime_session import SAY_INSTRUCTIONS, RealtimeVoiceSession

RATE = 16000
FRAME = frame_bytes(RATE)
ROOM = "call-1"
LONG = (
    "Here is a long answer about the weather in several cities. It will be sunny in Paris, "
    "cloudy in London, and rainy in Berlin for most of the coming week."
)


def brain(turn: Turn) -> list[Say | Call]:
    """A small model: answers turns, calls research on "solar", repeats what it is told."""
    last = turn.last
    said = SAY_INSTRUCTIONS.split("{text}")[0]
    if turn.instructions.startswith(said):
        return [Say(turn.instructions[len(said) :])]
    if last.get("type") == "function_call_output":
        return [Say(f"Here is what I found: {last['output']}.")]
    if last.get("role") == "system":
        return [Say("News: " + turn.last_text().removeprefix("Background result: "))]
    if last.get("role") == "user" and "solar" in turn.last_text():
        if "research" in turn.tools:
            return [Say("Let me look into that."), Call("research", {"topic": "solar panels"})]
    if last.get("role") == "user":
        return [Say("Hello, how can I help?")]
    return [Say(turn.instructions or "Okay.")]


class Research:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ToolContext]] = []

    def tool(self) -> Tool:
        @tool
        def research(topic: str, ctx: ToolContext) -> str:
            """Research a topic in the background."""
            self.calls.append((topic, ctx))
            return "panels got cheaper"

        return research


class Harness:
    def __init__(self, hub: Hub, server: FakeRealtimeServer) -> None:
        self.hub, self.server = hub, server
        self.client = AsyncOpenAI(api_key="test-key", base_url=server.base_url)
        self.sessions: list[RealtimeVoiceSession] = []
        self.research = Research()

    def agent(self, **fields: Any) -> Agent:
        base: dict[str, Any] = {
            "id": "desk",
            "instructions": "You are the research desk.",
            "tools": (self.research.tool(),),
        }
        return Agent(**{**base, **fields})

    async def start(
        self, agent: Agent | None = None, *, ack: AckMode = "manual", **options: Any
    ) -> tuple[RealtimeVoiceSession, FakeTransport, RecordingActivity]:
        transport = FakeTransport(RATE, ack=ack)
        activity = RecordingActivity(self.hub.clock)
        settings = RealtimeSettings(silence_ms=300, transcription_model="gpt-4o-mini-transcribe")
        session = RealtimeVoiceSession(
            self.hub,
            ROOM,
            agent or self.agent(),
            transport,
            client=self.client,
            settings=settings,
            activity=activity,
            mark_every_ms=100,
            **options,
        )
        transport.session = session
        self.sessions.append(session)
        await session.start()
        return session, transport, activity


@pytest.fixture(scope="module")
def caller_speech() -> bytes:
    return synthesize("please research solar panels", voice="piper", sample_rate=RATE)


@pytest.fixture
async def call() -> AsyncIterator[Harness]:
    async with FakeRealtimeServer(brain) as server, Hub(clock=VirtualClock()) as hub:
        await hub.create_room(ROOM, orchestration=None)
        harness = Harness(hub, server)
        yield harness
        for session in harness.sessions:
            await session.aclose()


async def speak(session: RealtimeVoiceSession, pcm16: bytes, silence: float = 0.5) -> None:
    audio = pcm16 + bytes(2 * int(RATE * silence))
    for start in range(0, len(audio), FRAME):
        await session.push_audio(audio[start : start + FRAME])


async def until(
    activity: VoiceActivity, predicate: Callable[[ActivitySnapshot], bool], timeout: float = 30
) -> ActivitySnapshot:
    async def wait() -> ActivitySnapshot:
        snapshot = activity.snapshot()
        while not predicate(snapshot):
            snapshot = await activity.wait_for_change(snapshot.version)
        return snapshot

    return await asyncio.wait_for(wait(), timeout)


def finals(transport: FakeTransport) -> list[tuple[str, str]]:
    return [(e["role"], e["text"]) for e in transport.events_of("transcript") if e["final"]]


def events(history: list[Event], kind: EventKind, role: str | None = None) -> list[Event]:
    return [e for e in history if e.kind is kind and (role is None or e.role == role)]


# -- tests --------------------------------------------------------------------------------------


async def test_a_turn_end_to_end(call: Harness, caller_speech: bytes) -> None:
    session, transport, activity = await call.start()
    [update] = call.server.of_type("session.update")
    config = update["session"]
    assert config["type"] == "realtime" and config["instructions"] == "You are the research desk."
    assert config["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert config["audio"]["input"]["turn_detection"]["type"] == "server_vad"
    assert config["tools"][0]["name"] == "research" and "function" not in config["tools"][0]
    assert call.server.requests == ["/v1/realtime?model=gpt-realtime"]
    assert activity.snapshot().session_live and activity.is_idle

    await speak(session, synthesize("hello there", voice="piper", sample_rate=RATE))
    # the model answered; its audio is handed over but not yet heard: not idle
    await transport.wait_for(lambda: any(":" not in m and "@" not in m for m in transport.marks))
    snapshot = await until(activity, lambda s: not s.agent_speaking)
    assert snapshot.playout_pending and not snapshot.is_idle
    assert transport.seconds_of_audio > 0.5
    progress = [m for m in transport.marks if "@" in m]
    assert len(progress) >= 3  # one every 100 ms of audio, then the final mark
    transport.ack()
    await until(activity, lambda s: s.is_idle)
    await transport.wait_for(lambda: ("assistant", "Hello, how can I help?") in finals(transport))

    appended = sum(len(e["audio"]) for e in call.server.of_type("input_audio_buffer.append"))
    assert appended * 3 // 4 > 2 * 24000 * 1.0  # base64 of > 1 s of 24 kHz PCM16
    names = [name for name, _, _ in activity.log]
    for earlier, later in [
        ("user_speech_started", "user_speech_stopped"),
        ("user_speech_stopped", "agent_thinking_started"),
        ("agent_thinking_started", "agent_speech_started"),
        ("agent_speech_started", "agent_speech_finished"),
        ("agent_speech_finished", "playout_confirmed"),
    ]:
        assert names.index(earlier) < names.index(later), (earlier, later)
    first = names.index("user_speech_started")
    last = len(names) - 1 - names[::-1].index("playout_confirmed")
    assert not any(s.is_idle for _, _, s in activity.log[first:last])
    assert activity.log[last][2].is_idle  # the confirmation of the last audio ends the turn

    history = await call.hub.history(ROOM)
    [user] = events(history, EventKind.TRANSCRIPT, "user")
    assert "there" in user.text  # PocketSphinx in the fake heard the caller
    [agent] = events(history, EventKind.TRANSCRIPT, "assistant")
    assert agent.text == "Hello, how can I help?" and agent.metadata["interrupted"] is False
    states = [e["state"] for e in transport.events_of("agent_state")]
    assert states[:3] == ["thinking", "speaking", "listening"]
