"""The pipeline session (voicehub's engine) with the real offline stack: what only this engine
has (its VADs, its activity sequence, its voices and configuration errors). What every engine
does is in the contract suite (`tests/voice/contract`).

The caller's words are synthesized by Piper and pushed as 20 ms frames faster than real
time; Silero (or WebRTC) VAD and PocketSphinx hear them, a scripted agent answers, Piper
speaks, and the in-memory transport confirms playout when the test says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.support.waiting import until_activity
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext, tool
from voicehub.core.clock import Clock
from voicehub.core.events import Event, EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.testing import AckMode, MemoryTransport
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import EngineOptions, PipelineVoiceSession
from voicehub.voice.events import AgentState, Transcript
from voicehub.voice.providers.offline import (
    PiperTTS,
    PocketSphinxSTT,
    load_vad,
)
from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD
from voicehub_dev.fakes.voice_providers import pipeline_session

RATE = 16000
FRAME = frame_bytes(RATE)
ROOM = "call-1"
LONG = (
    "Here is a long answer about the weather in several cities. It will be sunny in Paris, "
    "cloudy in London, and rainy in Berlin for most of the coming week."
)


# -- shared models (loaded once per module) -------------------------------------------------


@pytest.fixture(scope="module")
def caller_speech() -> bytes:
    return spoken("please research solar panels", rate=RATE)


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    stt = PocketSphinxSTT()
    stt.prewarm()
    piper = PiperTTS(sample_rate=22050)
    piper.prewarm()
    # a second voice, at the transport's rate; eSpeak stays out of these tests because its C
    # library keeps state between utterances (other tests compare two eSpeak renderings)
    robot = PiperTTS(sample_rate=RATE)
    vads = {"silero": load_vad("silero"), "webrtc": load_vad("webrtc")}
    # the server's Silero: batched across calls
    vads["batched"] = BatchedSileroVAD(vads["silero"])
    return {"stt": stt, "vad": vads["silero"], **vads, "piper": piper, "robot": robot}


# -- the agent --------------------------------------------------------------------------------


class Calls:
    def __init__(self) -> None:
        self.research: list[tuple[str, ToolContext]] = []
        self.book: list[str] = []

    def tools(self) -> tuple[Tool, Tool]:
        @tool
        def research(topic: str, ctx: ToolContext) -> str:
            """Research a topic in the background."""
            self.research.append((topic, ctx))
            return "panels got cheaper"

        @tool
        def book(slot: str) -> str:
            """Book an appointment."""
            self.book.append(slot)
            return f"booked for {slot}"

        return research, book


def desk_agent(research: Tool) -> Agent:
    rules: list[dict[str, Any]] = [
        {
            "match": ["solar"],
            "say": "Let me look into that.",
            "tool": "research",
            "arguments": {"topic": "{last_user}"},
            "reply": "Here is what I found: {result}.",
        },
        {"regex": r"result now: (?P<result>.+)", "on": "instruction", "say": "News: {result}"},
    ]
    return Agent(
        id="desk",
        instructions="You are the research desk.",
        llm=ScriptedLLM(rules),
        tools=(research,),
    )


def booking_agent(book: Tool) -> Agent:
    rules: list[dict[str, Any]] = [
        {"match": ["confirm"], "on": "instruction", "tool": "book", "arguments": {"slot": "noon"}},
        {"match": ["solar"], "tool": "research", "say": "Researching."},
    ]
    return Agent(
        id="booking",
        instructions="You are the booking desk.",
        llm=ScriptedLLM(rules, instruction_fallback="Noted."),
        tools=(book,),
        voice="robot",
    )


class RecordingActivity(VoiceActivity):
    """A VoiceActivity that logs every call with the snapshot right after it."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.clock = clock
        self.log: list[tuple[str, tuple[Any, ...], ActivitySnapshot]] = []
        self.times: dict[str, list[float]] = {}

    def calls(self, name: str) -> list[tuple[Any, ...]]:
        return [args for called, args, _ in self.log if called == name]


def _recorded(name: str) -> Callable[..., None]:
    def method(self: RecordingActivity, *args: Any, **kwargs: Any) -> None:
        getattr(VoiceActivity, name)(self, *args, **kwargs)
        self.log.append((name, (*args, *kwargs.values()), self.snapshot()))
        self.times.setdefault(name, []).append(self.clock.now())

    return method


for _name in (
    "user_speech_started",
    "user_speech_stopped",
    "user_turn_awaiting_answer",
    "agent_thinking_started",
    "agent_thinking_finished",
    "agent_speech_started",
    "agent_speech_finished",
    "playout_confirmed",
    "reply_queued",
    "reply_dequeued",
):
    setattr(RecordingActivity, _name, _recorded(_name))


# -- harness ----------------------------------------------------------------------------------


class Call:
    def __init__(self, hub: Hub, models: dict[str, Any], calls: Calls) -> None:
        self.hub, self.models, self.calls = hub, models, calls
        self.sessions: list[PipelineVoiceSession] = []

    async def start(
        self,
        agent: Agent,
        *,
        ack: AckMode = "manual",
        tts: str = "piper",
        vad: str = "silero",
        **options: Any,
    ) -> tuple[PipelineVoiceSession, MemoryTransport, RecordingActivity]:
        transport = MemoryTransport(RATE, ack=ack)
        activity = RecordingActivity(self.hub.clock)
        session = pipeline_session(
            self.hub,
            ROOM,
            agent,
            transport,
            stt=self.models["stt"],
            vad=self.models[vad],
            tts=self.models[tts],
            activity=activity,
            **options,
        )
        transport.session = session
        self.sessions.append(session)
        await session.start()
        return session, transport, activity


@pytest.fixture
async def call(models: dict[str, Any]) -> AsyncIterator[Call]:
    async with Hub() as hub:
        await hub.create_room(ROOM, orchestration=None)
        harness = Call(hub, models, Calls())
        yield harness
        for session in harness.sessions:
            await session.aclose()


async def speak(session: PipelineVoiceSession, pcm16: bytes, silence: float = 0.8) -> None:
    """The caller says `pcm16`, then stays silent; pushed faster than real time."""
    audio = pcm16 + bytes(2 * int(RATE * silence))
    for start in range(0, len(audio), FRAME):
        await session.push_audio(audio[start : start + FRAME])


async def said(transport: MemoryTransport, text: str) -> None:
    """Wait for the agent's transcript (sent to the client after the room got it)."""
    await transport.wait_for(lambda: any(text in e.text for e in transport.events_of(Transcript)))


def events(history: list[Event], kind: EventKind, role: str | None = None) -> list[Event]:
    return [e for e in history if e.kind is kind and (role is None or e.role == role)]


# -- tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("vad", ["silero", "webrtc", "batched"])
async def test_caller_asks_agent_calls_tool_and_answers(
    call: Call, caller_speech: bytes, vad: str
) -> None:
    research, _ = call.calls.tools()
    session, transport, activity = await call.start(desk_agent(research), vad=vad)
    assert activity.snapshot().session_live and activity.is_idle

    await speak(session, caller_speech)
    # the first step ("Let me look into that.") is handed over; the caller has not heard it
    await transport.wait_for(lambda: len(transport.marks) >= 1)
    assert not activity.snapshot().is_idle
    assert activity.snapshot().playout_pending
    transport.ack()
    await transport.wait_for(lambda: len(transport.marks) >= 2)  # the answer after the tool
    assert not activity.snapshot().is_idle
    transport.ack()
    await until_activity(activity, lambda s: s.is_idle)
    await said(transport, "Here is what I found")  # the room has the transcript too by then

    [(topic, ctx)] = call.calls.research
    assert "solar" in topic
    assert (ctx.room_id, ctx.agent_id, ctx.call_id[:5]) == (ROOM, "desk", "call_")
    assert transport.seconds_of_audio > 2.0
    assert transport.acked == transport.marks  # every segment confirmed, none cut

    history = await call.hub.history(ROOM)
    users = events(history, EventKind.TRANSCRIPT, "user")
    # one turn, even on a starved machine where the recognizer's interims and final come
    # seconds late and all at once (docs/engine.md)
    [user] = users
    assert "solar" in user.text, [(e.role, e.text) for e in history]
    [tool_call] = events(history, EventKind.TOOL_CALL)
    assert tool_call.metadata["tool"] == "research"
    assert json.loads(tool_call.text)["topic"] == topic
    [result] = events(history, EventKind.TOOL_RESULT)
    assert (result.text, result.metadata["is_error"]) == ("panels got cheaper", False)
    spoken = [e.text for e in events(history, EventKind.TRANSCRIPT, "assistant")]
    assert spoken == ["Let me look into that.", "Here is what I found: panels got cheaper."]

    # activity went through every busy state, in a sensible order, and ended idle
    names = [name for name, _, _ in activity.log]
    for earlier, later in [
        ("user_speech_started", "user_speech_stopped"),
        ("user_speech_stopped", "agent_thinking_started"),  # the reply may be prepared
        ("user_speech_stopped", "reply_queued"),  # (queued) before the turn committed
        ("agent_thinking_started", "agent_speech_started"),
        ("reply_queued", "agent_speech_started"),
        ("agent_speech_started", "agent_speech_finished"),
        ("agent_speech_finished", "playout_confirmed"),
    ]:
        assert names.index(earlier) < names.index(later), (earlier, later)
    assert [args[0] for args in activity.calls("playout_confirmed")] == transport.marks
    # never idle, not even for an instant, from the caller's first word to the last playout
    first = names.index("user_speech_started")
    last = len(names) - 1 - names[::-1].index("playout_confirmed")
    idle = [(name, at) for name, at, snapshot in activity.log[first : last + 1] if snapshot.is_idle]
    assert not idle, (idle, [(name, at) for name, at, _ in activity.log])
    assert activity.log[-1][2].is_idle
    assert (True,) in activity.calls("user_turn_awaiting_answer")
    assert all(not s.is_idle for name, _, s in activity.log if name == "agent_speech_started")

    # client events: live captions, states and the tool call
    kinds = {e.type for e in transport.events}
    assert {"transcript", "user_state", "agent_state", "tool_call"} <= kinds
    finals = [e for e in transport.events_of(Transcript) if e.role == "user" and e.final]
    assert any("solar" in e.text for e in finals)
    states = [e.state for e in transport.events_of(AgentState)]
    assert "thinking" in states and "speaking" in states

    # latency, for the record: the VAD's end of the caller's turn -> first agent audio
    assert transport.first_audio_at is not None
    latency = transport.first_audio_at - activity.times["user_speech_stopped"][0]
    print(f"{vad}: end of caller turn -> first agent audio: {latency:.2f} s")
    assert 0 < latency < 10


async def test_update_agent_switches_instructions_tools_and_voice(call: Call) -> None:
    research, book = call.calls.tools()
    robot = call.models["robot"]
    session, transport, _ = await call.start(
        desk_agent(research), ack="immediate", voices={"robot": robot}
    )
    assert await session.say("Welcome to the research desk.") is InjectOutcome.FINISHED

    await session.update_agent(booking_agent(book))

    agent, tools, _, voice = session.replies.reply_agent()
    assert agent.instructions == "You are the booking desk."
    assert [t.name for t in (*agent.tools, *tools)] == ["book"]
    assert voice is robot
    assert session.agent.id == "booking"
    spoken = [m.content for m in session.history.messages() if m.role == "assistant"]
    assert spoken == ["Welcome to the research desk."]  # the history came along

    assert await session.generate_reply("please confirm the booking") is InjectOutcome.FINISHED
    assert call.calls.book == ["noon"] and call.calls.research == []
    await said(transport, "booked for noon")
    history = await call.hub.history(ROOM)
    assert [e.metadata["tool"] for e in events(history, EventKind.TOOL_CALL)] == ["book"]


def test_configuration_errors_name_the_fix(models: dict[str, Any]) -> None:
    hub = Hub()
    transport = MemoryTransport(RATE)
    options: dict[str, Any] = {"stt": models["stt"], "vad": models["vad"], "tts": models["piper"]}
    with pytest.raises(ConfigError, match="no llm"):
        pipeline_session(hub, ROOM, Agent(id="mute"), transport, **options)
    with pytest.raises(ConfigError, match="known voices: none"):
        pipeline_session(hub, ROOM, booking_agent(Calls().tools()[1]), transport, **options)
    with pytest.raises(ConfigError, match="delivery_mode"):
        mode: Any = "sing"
        EngineOptions(delivery_mode=mode)
