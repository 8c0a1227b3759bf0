"""What every voice engine does, tested once for both (`engine` is the pipeline engine on
the offline stack, then the realtime engine on the fake Realtime server)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.voice.contract.engines import FOUND, LONG, ROOM, Harness, caller_speech
from voicehub.agents.agent import Agent
from voicehub.agents.tools import tool
from voicehub.core.clock import settle
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import VoicehubError
from voicehub.voice.events import AgentState, ToolCall, Transcript, UserState


def spoken(history: list[Event], role: str = "assistant") -> list[Event]:
    return [e for e in history if e.kind is EventKind.TRANSCRIPT and e.role == role]


def said(transport: object, text: str) -> bool:
    events = transport.events_of(Transcript)  # type: ignore[attr-defined]
    return any(e.role == "assistant" and e.final and text in e.text for e in events)


@pytest.mark.slow
async def test_a_request_runs_the_tool_and_is_answered_aloud(engine: Harness) -> None:
    session, transport = await engine.start(ack="immediate")
    assert session.activity.snapshot().session_live and session.activity.is_idle
    await engine.speak(session, caller_speech())
    await engine.until(lambda: said(transport, f"Here is what I found: {FOUND}."))
    await engine.until(lambda: session.activity.is_idle)

    [(topic, ctx)] = engine.research.calls
    assert topic == "solar panels"
    assert (ctx.room_id, ctx.agent_id) == (ROOM, "desk") and ctx.call_id
    history = await engine.hub.history(ROOM)
    [user] = spoken(history, "user")
    assert "solar" in user.text
    [call] = [e for e in history if e.kind is EventKind.TOOL_CALL]
    assert call.metadata["tool"] == "research" and json.loads(call.text)["topic"] == topic
    [result] = [e for e in history if e.kind is EventKind.TOOL_RESULT]
    assert result.text == FOUND
    assert [e.text for e in spoken(history)] == [
        "Let me look into that.",
        f"Here is what I found: {FOUND}.",
    ]
    assert all(e.metadata["interrupted"] is False for e in spoken(history))
    assert transport.events_of(ToolCall)[0].name == "research"
    assert {"speaking", "listening"} <= {e.state for e in transport.events_of(UserState)}
    assert {"thinking", "speaking"} <= {e.state for e in transport.events_of(AgentState)}
    assert transport.acked and not transport.pending  # every speech confirmed, none cut


async def test_speech_ends_only_once_the_transport_confirmed_playout(engine: Harness) -> None:
    session, transport = await engine.start()
    speaking = asyncio.create_task(session.say("Your report is ready."))
    await engine.until(
        lambda: bool(transport.marks) and not session.activity.snapshot().agent_speaking
    )
    snapshot = session.activity.snapshot()
    assert snapshot.playout_pending and not snapshot.is_idle
    assert not speaking.done(), "say() returned before the transport confirmed playout"
    transport.ack()
    assert await asyncio.wait_for(speaking, 10) is InjectOutcome.FINISHED
    await engine.until(lambda: session.activity.is_idle)
    session.playout_confirmed("no-such-mark")  # unknown and repeated marks change nothing
    session.playout_confirmed(transport.marks[-1])
    assert session.activity.is_idle
    await engine.until(lambda: said(transport, "Your report is ready."))


@pytest.mark.slow
async def test_the_caller_cuts_the_agent_off(engine: Harness) -> None:
    session, transport = await engine.start()
    speaking = asyncio.create_task(session.say(LONG))
    await engine.until(lambda: bool(transport.marks))  # handed over, not heard
    await engine.speak(session, caller_speech())
    assert await asyncio.wait_for(speaking, 20) is InjectOutcome.INTERRUPTED
    assert transport.clears >= 1
    transport.ack_mode = "immediate"
    transport.ack()
    # the caller's words still get their answer
    await engine.until(lambda: said(transport, "Let me look into that."))
    history = await engine.hub.history(ROOM)
    assert spoken(history)[0].metadata["interrupted"] is True
    assert engine.research.calls


async def test_interrupt_stops_the_agent_at_once(engine: Harness) -> None:
    session, transport = await engine.start()
    speaking = asyncio.create_task(session.say(LONG))
    await engine.until(lambda: bool(transport.marks))
    await session.interrupt()
    assert await asyncio.wait_for(speaking, 10) is InjectOutcome.INTERRUPTED
    await engine.until(lambda: session.activity.is_idle)


async def test_an_immediate_result_cuts_the_agent_and_is_spoken(engine: Harness) -> None:
    outcomes: list[str] = []

    @engine.hub.hook(HookTrigger.AFTER_DELIVER)
    async def observe(event: Event, ctx: HookContext) -> None:
        outcomes.append(event.metadata["outcome"])

    session, transport = await engine.start(ack="immediate")
    transport.ack_mode = "manual"
    talking = asyncio.create_task(session.say(LONG))
    await engine.until(lambda: bool(transport.marks))
    transport.ack_mode = "immediate"
    await engine.hub.deliver(ROOM, "Your solar report is ready.", strategy="immediate")
    await engine.until(lambda: outcomes == ["delivered"])
    assert await talking is InjectOutcome.INTERRUPTED
    await engine.until(lambda: said(transport, "Your solar report is ready."))


@pytest.mark.parametrize("mode", ["say", "generate"])
async def test_a_result_is_spoken_verbatim_or_worded_by_the_model(
    engine: Harness, mode: str
) -> None:
    session, transport = await engine.start(ack="immediate", delivery_mode=mode)
    outcome = await session.inject(
        "the solar report is ready", allow_interrupt=False, metadata={"delivery_ids": ["d1"]}
    )
    assert outcome is InjectOutcome.FINISHED
    expected = "the solar report is ready" if mode == "say" else "News: the solar report is ready"
    await engine.until(lambda: said(transport, expected))
    await engine.until(lambda: session.activity.is_idle)


async def test_a_result_is_held_at_its_first_frame_while_the_caller_speaks(
    engine: Harness,
) -> None:
    session, transport = await engine.start(ack="immediate")
    loud = max(
        (caller_speech()[i : i + 640] for i in range(0, len(caller_speech()) - 640, 640)),
        key=lambda frame: sum(
            abs(int.from_bytes(frame[j : j + 2], "little", signed=True)) for j in range(0, 640, 2)
        ),
    )
    await session.push_audio(loud)  # the caller's voice, just now
    outcome = await session.inject(
        "the solar report is ready", allow_interrupt=False, metadata={"delivery_ids": ["d1"]}
    )
    assert outcome is InjectOutcome.DEFERRED
    assert transport.seconds_of_audio == 0  # nothing of it went out


async def test_a_typed_turn_is_answered_like_a_spoken_one(engine: Harness) -> None:
    session, transport = await engine.start(ack="immediate")
    await session.push_text("please research solar panels")  # keys pressed on a phone
    await engine.until(lambda: said(transport, f"Here is what I found: {FOUND}."))
    history = await engine.hub.history(ROOM)
    assert any(e.text == "please research solar panels" for e in spoken(history, "user"))
    assert engine.research.calls


async def test_a_tool_hands_the_call_to_another_agent(engine: Harness) -> None:
    sessions: list[object] = []
    booking = engine.agent(id="booking", instructions="You are the booking desk.", tools=())

    @tool
    async def research(topic: str) -> str:
        """Hand the caller to the booking desk."""
        await sessions[0].update_agent(booking)  # type: ignore[attr-defined]  # no deadlock
        return "transferring you now"

    front: Agent = engine.agent(tools=(research,))
    session, _ = await engine.start(front, ack="immediate")
    sessions.append(session)
    await session.push_text("please transfer me")
    await engine.until(lambda: session.agent.id == "booking")
    history = await engine.hub.history(ROOM)
    [call] = [e for e in history if e.kind is EventKind.TOOL_CALL]
    assert call.source == "desk"  # the tool ran for the agent that was on the call then
    assert session.agent.instructions == "You are the booking desk."


async def test_hanging_up_is_quick_and_final(engine: Harness) -> None:
    session, transport = await engine.start()
    speaking = asyncio.create_task(session.say(LONG))
    await engine.until(lambda: bool(transport.marks))
    started = time.perf_counter()
    await session.aclose()
    assert time.perf_counter() - started < 1.5
    assert await asyncio.wait_for(speaking, 5) is InjectOutcome.INTERRUPTED
    assert not session.activity.snapshot().session_live
    with pytest.raises(VoicehubError, match="not running"):
        await session.say("hello?")
    await session.aclose()  # idempotent


async def test_flush_returns_once_what_was_said_reached_the_room_and_the_caller(
    engine: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    session, transport = await engine.start(ack="immediate")
    store_answers = asyncio.Event()
    post = engine.hub.post

    async def slow_post(room_id: str, event: Event) -> Event:  # a store under load
        await store_answers.wait()
        return await post(room_id, event)

    monkeypatch.setattr(engine.hub, "post", slow_post)
    assert await session.say("Your report is ready.") is InjectOutcome.FINISHED
    flushing = asyncio.create_task(session.flush())
    await settle()
    assert not flushing.done() and not said(transport, "Your report is ready.")
    store_answers.set()
    await asyncio.wait_for(flushing, 10)
    assert said(transport, "Your report is ready.")  # a line closed now still carries it
    assert "Your report is ready." in [e.text for e in spoken(await engine.hub.history(ROOM))]
