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
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai import AsyncOpenAI

from tests.support.speech import spoken
from tests.support.waiting import until_activity
from tests.voice.engine.test_pipeline_session import RecordingActivity
from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool, ToolContext, tool
from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import WaitForIdle
from voicehub.hub import Hub
from voicehub.testing import AckMode, MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.events import AgentState, ProviderError, ToolCall, Transcript
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime_session import (
    SAY_INSTRUCTIONS,
    RealtimeCallOptions,
    RealtimeVoiceSession,
)
from voicehub_dev.fakes.openai_realtime import Call, FakeRealtimeServer, Say, Turn

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
    if last.get("role") == "user" and "solar" in turn.last_text() and "research" in turn.tools:
        return [Say("Let me look into that."), Call("research", {"topic": "solar panels"})]
    if last.get("role") == "user":
        return [Say("Hello, how can I help?")]
    return [Say(turn.instructions or "Okay.")]


_CALL_OPTIONS = ("delivery_mode", "answer_timeout", "backoff")  # RealtimeCallOptions


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
    ) -> tuple[RealtimeVoiceSession, MemoryTransport, RecordingActivity]:
        transport = MemoryTransport(RATE, ack=ack)
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
            options=RealtimeCallOptions(
                mark_every_ms=100,
                **{key: options.pop(key) for key in _CALL_OPTIONS if key in options},
            ),
            **options,
        )
        transport.session = session
        self.sessions.append(session)
        await session.start()
        return session, transport, activity


@pytest.fixture(scope="module")
def caller_speech() -> bytes:
    return spoken("please research solar panels", rate=RATE)


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


def finals(transport: MemoryTransport) -> list[tuple[str, str]]:
    return [(e.role, e.text) for e in transport.events_of(Transcript) if e.final]


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

    await speak(session, spoken("hello there", rate=RATE))
    # the model answered; its audio is handed over but not yet heard: not idle
    await transport.wait_for(lambda: any(":" not in m and "@" not in m for m in transport.marks))
    snapshot = await until_activity(activity, lambda s: not s.agent_speaking)
    assert snapshot.playout_pending and not snapshot.is_idle
    assert transport.seconds_of_audio > 0.5
    progress = [m for m in transport.marks if "@" in m]
    assert len(progress) >= 3  # one every 100 ms of audio, then the final mark
    transport.ack()
    await until_activity(activity, lambda s: s.is_idle)
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
    states = [e.state for e in transport.events_of(AgentState)]
    assert states[:3] == ["thinking", "speaking", "listening"]


async def test_a_tool_call_is_run_and_answered(call: Harness, caller_speech: bytes) -> None:
    session, transport, activity = await call.start(ack="immediate")
    await speak(session, caller_speech)
    await transport.wait_for(
        lambda: ("assistant", "Here is what I found: panels got cheaper.") in finals(transport)
    )
    await until_activity(activity, lambda s: s.is_idle)

    [(topic, ctx)] = call.research.calls
    assert topic == "solar panels"
    assert (ctx.room_id, ctx.agent_id) == (ROOM, "desk") and ctx.call_id.startswith("call_")
    [output] = [
        e["item"]
        for e in call.server.of_type("conversation.item.create")
        if e["item"]["type"] == "function_call_output"
    ]
    assert output == {
        "type": "function_call_output",
        "call_id": ctx.call_id,
        "output": "panels got cheaper",
    }
    # the output went in before the follow-up response was asked for
    kinds = [e["type"] for e in call.server.received if e["type"] != "input_audio_buffer.append"]
    assert kinds.index("conversation.item.create") < len(kinds) - 1 - kinds[::-1].index(
        "response.create"
    )

    history = await call.hub.history(ROOM)
    [tool_call] = events(history, EventKind.TOOL_CALL)
    assert tool_call.metadata["tool"] == "research"
    assert json.loads(tool_call.text) == {"topic": "solar panels"}
    [result] = events(history, EventKind.TOOL_RESULT)
    assert result.text == "panels got cheaper"
    spoken = [e.text for e in events(history, EventKind.TRANSCRIPT, "assistant")]
    assert spoken == ["Let me look into that.", "Here is what I found: panels got cheaper."]
    assert transport.events_of(ToolCall)[0].name == "research"


@pytest.mark.parametrize("mode", ["say", "generate"])
async def test_delivery_waits_for_the_model_and_the_caller(call: Harness, mode: str) -> None:
    outcomes: asyncio.Queue[str] = asyncio.Queue()

    @call.hub.hook(HookTrigger.AFTER_DELIVER)
    async def observe(event: Event, ctx: HookContext) -> None:
        outcomes.put_nowait(event.metadata["outcome"])

    session, transport, activity = await call.start(delivery_mode=mode)
    clock = call.hub.clock
    assert isinstance(clock, VirtualClock)
    call.server.hold = asyncio.Event()  # the model's reply stays "in progress"
    talking = asyncio.create_task(session.generate_reply("Tell the caller about the weather."))
    await call.server.wait_for(lambda: call.server.sessions[-1].active is not None)

    await call.hub.deliver(ROOM, "the solar report is ready", strategy=WaitForIdle(1.0))
    await clock.advance(5.0)  # long past the buffer: still busy, nothing may be injected
    assert len(call.server.of_type("response.create")) == 1
    call.server.hold.set()
    await until_activity(activity, lambda s: s.playout_pending and not s.agent_speaking)
    await clock.advance(5.0)
    assert len(call.server.of_type("response.create")) == 1  # not heard yet: still busy
    transport.ack()
    assert await talking is InjectOutcome.FINISHED
    await until_activity(activity, lambda s: s.is_idle)
    await clock.advance(1.0)  # the idle buffer
    await call.server.wait_for(lambda: len(call.server.of_type("response.create")) == 2)
    injected = call.server.of_type("response.create")[-1]
    assert injected["response"]["metadata"]["voicehub"].startswith("voicehub_")
    if mode == "say":
        expected = "the solar report is ready"
        assert expected in injected["response"]["instructions"]
    else:
        expected = "News: the solar report is ready"
        item = call.server.of_type("conversation.item.create")[-1]["item"]
        assert item["role"] == "system"
        assert item["content"][0]["text"] == "Background result: the solar report is ready"
    await until_activity(
        activity, lambda s: s.playout_pending and not (s.agent_speaking or s.agent_thinking)
    )
    assert outcomes.empty()  # delivered only once playout is confirmed
    transport.ack()
    await transport.wait_for(lambda: ("assistant", expected) in finals(transport))
    assert await asyncio.wait_for(outcomes.get(), 10) == "delivered"


async def test_barge_in_cuts_cancels_and_truncates_at_the_heard_audio(
    call: Harness, caller_speech: bytes
) -> None:
    session, transport, activity = await call.start()
    call.server.hold, call.server.hold_after = asyncio.Event(), 5
    speaking = asyncio.create_task(session.say(LONG))
    await transport.wait_for(lambda: len(transport.marks) >= 5)  # 500 ms handed over
    heard = transport.marks[1]
    transport.ack(heard)  # the caller heard the first 200 ms, no more
    await speak(session, caller_speech)

    assert await asyncio.wait_for(speaking, 20) is InjectOutcome.INTERRUPTED
    assert transport.clears == 1
    await call.server.wait_for(lambda: bool(call.server.of_type("conversation.item.truncate")))
    [truncate] = call.server.of_type("conversation.item.truncate")
    item_id, position = heard.split("@")
    assert truncate == {
        "type": "conversation.item.truncate",
        "item_id": item_id,
        "content_index": 0,
        "audio_end_ms": int(position),
    }
    # the server cancelled on the caller's turn first; the session's cancel is then harmless
    assert call.server.of_type("response.cancel")
    assert (item_id, True) in activity.calls("agent_speech_finished")
    session.playout_confirmed(item_id)  # a late mark of cut audio changes nothing
    assert item_id not in [args[0] for args in activity.calls("playout_confirmed")]
    # the caller's turn still gets its answer
    call.server.hold.set()
    transport.ack_mode = "immediate"
    transport.ack()
    await transport.wait_for(lambda: ("assistant", "Let me look into that.") in finals(transport))
    history = await call.hub.history(ROOM)
    first = events(history, EventKind.TRANSCRIPT, "assistant")[0]
    assert first.metadata["interrupted"] is True and first.metadata["item_id"] == item_id


async def test_interrupt_cancels_a_running_response(call: Harness) -> None:
    session, transport, activity = await call.start()
    call.server.hold = asyncio.Event()
    speaking = asyncio.create_task(session.say(LONG))
    await transport.wait_for(lambda: len(transport.marks) >= 1)
    await session.interrupt()
    assert await asyncio.wait_for(speaking, 10) is InjectOutcome.INTERRUPTED
    [cancel] = call.server.of_type("response.cancel")
    [created] = [e for e in call.server.sent if e["type"] == "response.created"]
    assert cancel == {"type": "response.cancel", "response_id": created["response"]["id"]}
    # nothing was heard: truncated at 0 ms, so the model's memory holds none of it
    [truncate] = call.server.of_type("conversation.item.truncate")
    assert truncate["audio_end_ms"] == 0
    await until_activity(activity, lambda s: s.is_idle)


async def test_update_agent_switches_instructions_tools_and_voice(call: Harness) -> None:
    session, _, _ = await call.start(ack="immediate")

    @tool
    def book(slot: str) -> str:
        """Book an appointment."""
        return f"booked for {slot}"

    booking = Agent(
        id="booking", instructions="You are the booking desk.", tools=(book,), voice="cedar"
    )
    await session.update_agent(booking)  # before any audio: the voice may change
    update = call.server.of_type("session.update")[-1]["session"]
    assert update["instructions"] == "You are the booking desk."
    assert [t["name"] for t in update["tools"]] == ["book"]
    assert update["audio"] == {"output": {"voice": "cedar"}}
    assert call.server.sessions[-1].config["audio"]["output"]["voice"] == "cedar"
    assert (session.agent.id, session.voice) == ("booking", "cedar")
    assert len(call.server.sessions) == 1  # the same connection

    assert await session.say("Welcome.") is InjectOutcome.FINISHED
    await session.update_agent(call.agent(voice="marin"))  # spoke already: voice stays
    update = call.server.of_type("session.update")[-1]["session"]
    assert "audio" not in update and update["instructions"] == "You are the research desk."
    assert session.voice == "cedar"


async def test_a_tool_can_hand_the_call_over(call: Harness, caller_speech: bytes) -> None:
    sessions: list[RealtimeVoiceSession] = []
    booking = Agent(id="booking", instructions="You are the booking desk.")

    @tool
    async def research(topic: str) -> str:
        """Hand the caller to the booking desk."""
        await sessions[0].update_agent(booking)  # from inside a tool: must not deadlock
        return "transferring you now"

    session, transport, _ = await call.start(call.agent(tools=(research,)), ack="immediate")
    sessions.append(session)
    await speak(session, caller_speech)
    await transport.wait_for(
        lambda: ("assistant", "Here is what I found: transferring you now.") in finals(transport)
    )
    assert session.agent.id == "booking"
    updates = call.server.of_type("session.update")
    assert updates[-1]["session"]["instructions"] == "You are the booking desk."
    kinds = [e["type"] for e in call.server.received if e["type"] != "input_audio_buffer.append"]
    # instructions switched before the follow-up response the new agent speaks
    assert kinds.index("session.update", 1) < len(kinds) - 1 - kinds[::-1].index("response.create")


async def test_malformed_server_events_are_dropped(
    call: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    session, _, activity = await call.start(ack="immediate")
    caplog.set_level(logging.WARNING, "voicehub")
    await call.server.send_raw("this is not json")
    await call.server.send_raw('{"no": "type"}')
    await call.server.send_raw('{"type": "response.created"}')  # no response object
    await call.server.send_raw('{"type": "response.output_audio.delta", "response_id": 5}')
    assert await session.say("Still here.") is InjectOutcome.FINISHED
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "not JSON" in messages and "without a string type" in messages
    assert "dropped malformed response.created" in messages
    assert activity.snapshot().is_idle and activity.snapshot().session_live


async def test_model_errors_are_reported(call: Harness) -> None:
    _, transport, _ = await call.start(ack="immediate")
    error = {
        "type": "error",
        "event_id": "event_x",
        "error": {
            "type": "rate_limit_error",
            "code": "rate_limit_exceeded",
            "message": "slow down",
        },
    }
    await call.server.send_raw(json.dumps(error))
    await transport.wait_for(lambda: bool(transport.events_of(ProviderError)))
    assert transport.events_of(ProviderError)[0].message.startswith("rate_limit_exceeded")
    history = await call.hub.history(ROOM)
    assert any("slow down" in e.text for e in events(history, EventKind.SYSTEM))


async def test_a_typed_turn_goes_in_as_the_callers_message(call: Harness) -> None:
    session, transport, _ = await call.start(ack="immediate")
    await session.push_text("2")  # keypad digits on a phone
    await transport.wait_for(lambda: bool(call.server.of_type("response.create")))
    [item] = [
        e["item"]
        for e in call.server.of_type("conversation.item.create")
        if e["item"].get("role") == "user"
    ]
    assert item["content"] == [{"type": "input_text", "text": "2"}]
    history = await call.hub.history(ROOM)
    assert any(e.role == "user" and e.text == "2" for e in history)


async def test_batched_audio_goes_before_a_control_event(call: Harness) -> None:
    session, _, _ = await call.start(ack="immediate")
    for _ in range(2):  # 40 ms: less than a batch, held back
        await session.push_audio(bytes(FRAME))
    assert not call.server.of_type("input_audio_buffer.append")
    await session.push_text("2")
    await call.server.wait_for(lambda: bool(call.server.of_type("conversation.item.create")))
    kinds = [e["type"] for e in call.server.received]
    assert kinds.index("input_audio_buffer.append") < kinds.index("conversation.item.create")
    [append] = call.server.of_type("input_audio_buffer.append")
    assert 0 < len(append["audio"]) * 3 // 4 <= 2 * 960  # the 40 ms, at 24 kHz
