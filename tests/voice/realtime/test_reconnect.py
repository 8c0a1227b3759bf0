"""A dropped model connection: the realtime session reconnects and the call goes on.

Through the real `openai` SDK against the fake Realtime server, which drops connections
(no close frame), fails them (a `server_error` event, then close 1011) and refuses
handshakes (HTTP 429 / 503). The backoff between attempts runs on the virtual clock: the
tests move it and check that nothing reconnects before they do.
"""

from __future__ import annotations

import asyncio
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.support.waiting import until_activity
from tests.voice.realtime.test_session import (
    FRAME,
    LONG,
    ROOM,
    Harness,
    call,
    events,
    finals,
    speak,
)
from voicehub.agents.agent import Agent
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.delivery.injector import InjectOutcome
from voicehub.delivery.policy import WaitForIdle
from voicehub.voice.events import ProviderError
from voicehub.voice.realtime.link import Backoff
from voicehub.voice.realtime.recap import RECAP_HEADER

__all__ = ["call"]  # the fixture, shared with the session tests

RATE = 16000


def reports(transport: object) -> list[str]:
    return [e.message for e in transport.events_of(ProviderError)]  # type: ignore[attr-defined]


def outcomes_of(harness: Harness) -> asyncio.Queue[tuple[str, str]]:
    """(delivery id, outcome) of every delivery attempt, in order."""
    seen: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    @harness.hub.hook(HookTrigger.AFTER_DELIVER)
    async def observe(event: Event, ctx: HookContext) -> None:
        seen.put_nowait((event.metadata["delivery_id"], event.metadata["outcome"]))

    return seen


@pytest.mark.slow
async def test_a_drop_reconnects_and_restores_the_session_with_a_recap(call: Harness) -> None:
    session, transport, activity = await call.start(ack="immediate")
    await speak(session, spoken("hello there", rate=RATE))
    await transport.wait_for(lambda: ("assistant", "Hello, how can I help?") in finals(transport))
    await until_activity(activity, lambda s: s.is_idle)

    await call.server.drop()
    await call.server.wait_for(lambda: len(call.server.of_type("session.update")) == 2)
    await until_activity(activity, lambda s: s.is_idle)
    assert len(call.server.sessions) == 2 and session.running
    first, restored = (e["session"] for e in call.server.of_type("session.update"))
    # the whole configuration again, the same voice and tools, and the call so far
    assert restored["audio"] == first["audio"] and restored["tools"] == first["tools"]
    instructions = restored["instructions"]
    assert instructions.startswith("You are the research desk.")
    assert RECAP_HEADER in instructions
    assert "You: Hello, how can I help?" in instructions
    assert "Caller:" in instructions and "there" in instructions
    assert reports(transport)[0].startswith("model_disconnected")
    history = await call.hub.history(ROOM)
    assert any("restored" in e.text for e in events(history, EventKind.SYSTEM))

    # the call goes on over the new connection
    await speak(session, spoken("please research solar panels", rate=RATE))
    await transport.wait_for(
        lambda: ("assistant", "Here is what I found: panels got cheaper.") in finals(transport)
    )
    assert call.server.sessions[1].items  # the new connection heard the caller


async def test_a_delivery_in_flight_at_the_drop_is_offered_again_once(call: Harness) -> None:
    seen = outcomes_of(call)
    _, transport, activity = await call.start(ack="immediate")
    clock = call.hub.clock
    assert isinstance(clock, VirtualClock)
    call.server.hold = asyncio.Event()  # the result's response stays in progress
    await call.hub.deliver(ROOM, "the solar report is ready", strategy=WaitForIdle(1.0))
    await clock.advance(1.0)
    await call.server.wait_for(lambda: call.server.sessions[-1].active is not None)
    await call.server.drop()

    delivery_id, outcome = await asyncio.wait_for(seen.get(), 10)
    assert outcome == "interrupted"  # not lost: back in the queue
    await call.server.wait_for(lambda: len(call.server.of_type("session.update")) == 2)
    call.server.hold.set()
    await until_activity(activity, lambda s: s.is_idle)
    await clock.advance(1.0)  # idle again for the buffer: offered on the new connection
    assert await asyncio.wait_for(seen.get(), 20) == (delivery_id, "delivered")
    said = [
        e
        for e in call.server.of_type("response.create")
        if "the solar report is ready" in str(e.get("response", {}).get("instructions"))
    ]
    assert len(said) == 2  # once per connection: cut by the drop, then spoken in full
    spoken = [text for role, text in finals(transport) if role == "assistant"]
    assert spoken.count("the solar report is ready") == 1
    await clock.advance(5.0)
    assert seen.empty()  # never spoken again


async def test_refused_reconnects_back_off_on_the_clock_and_are_reported(call: Harness) -> None:
    session, transport, activity = await call.start(ack="immediate")
    clock = call.hub.clock
    assert isinstance(clock, VirtualClock)
    call.server.refuse(429, 503)
    await call.server.fail("The server had an error")

    # attempt 1 at once (refused, rate limited); attempt 2 only after 0.5 s on the clock
    await transport.wait_for(lambda: any("attempt 1" in m for m in reports(transport)))
    assert call.server.refused == 1
    await settle()
    assert clock.next_deadline() == 0.5  # waiting on the clock, not retrying
    assert call.server.refused == 1 and not activity.snapshot().is_idle
    await clock.advance(0.5)
    await transport.wait_for(lambda: any("attempt 2" in m for m in reports(transport)))
    await clock.advance(1.0)  # attempt 3 goes through
    await call.server.wait_for(lambda: len(call.server.sessions) == 2)
    await until_activity(activity, lambda s: s.is_idle)
    messages = reports(transport)
    assert messages[0].startswith("server_error: The server had an error")
    assert any(m.startswith("model_disconnected") for m in messages)
    assert any(m.startswith("model_rate_limited: attempt 1: HTTP 429") for m in messages)
    assert any(m.startswith("model_reconnect_failed: attempt 2: HTTP 503") for m in messages)
    assert await session.say("Still here.") is InjectOutcome.FINISHED


async def test_when_reconnecting_fails_the_call_ends_and_results_are_held(call: Harness) -> None:
    seen = outcomes_of(call)
    session, transport, activity = await call.start(backoff=Backoff(attempts=2, first_delay=1.0))
    clock = call.hub.clock
    assert isinstance(clock, VirtualClock)
    call.server.hold = asyncio.Event()
    talking = asyncio.create_task(session.say(LONG))
    await call.server.wait_for(lambda: call.server.sessions[-1].active is not None)
    await call.hub.deliver(ROOM, "the solar report is ready", strategy=WaitForIdle(0.5))
    call.server.refuse(503, 503)
    await call.server.drop()

    assert await asyncio.wait_for(talking, 10) is InjectOutcome.INTERRUPTED
    await transport.wait_for(lambda: any("attempt 1" in m for m in reports(transport)))
    await clock.advance(1.0)
    await until_activity(activity, lambda s: not s.session_live)
    assert (await asyncio.wait_for(seen.get(), 10))[1] == "held"
    await transport.wait_for(lambda: any("model_unreachable" in m for m in reports(transport)))
    assert call.server.refused == 2 and len(call.server.sessions) == 1
    await session.push_audio(bytes(FRAME))  # a closed session ignores late audio
    with pytest.raises(Exception, match="not running"):
        await session.say("hello?")


async def test_a_restored_session_the_model_refuses_ends_the_call(call: Harness) -> None:
    session, transport, activity = await call.start(ack="immediate")
    call.server.refuse_updates = "instructions too long"
    await call.server.drop()
    await until_activity(activity, lambda s: not s.session_live)
    await asyncio.wait_for(session.closed.wait(), 10)
    messages = reports(transport)
    assert any(m.startswith("model_unreachable") and "refused" in m for m in messages)
    assert len(call.server.sessions) == 2  # it did reconnect; the configuration was refused


async def test_a_handoff_while_reconnecting_is_applied_by_the_restore(call: Harness) -> None:
    session, transport, activity = await call.start(ack="immediate")
    clock = call.hub.clock
    assert isinstance(clock, VirtualClock)
    call.server.refuse(503)
    await call.server.drop()
    await transport.wait_for(lambda: any("attempt 1" in m for m in reports(transport)))
    booking = Agent(id="booking", instructions="You are the booking desk.", voice="cedar")
    await session.update_agent(booking)  # the link is down: nothing to send it on yet
    assert session.agent.id == "booking"
    await clock.advance(0.5)
    await call.server.wait_for(lambda: len(call.server.of_type("session.update")) == 2)
    restored = call.server.of_type("session.update")[-1]["session"]
    assert restored["instructions"].startswith("You are the booking desk.")
    assert restored["audio"]["output"]["voice"] == "cedar"  # nothing spoken yet: it may change
    await until_activity(activity, lambda s: s.is_idle)
