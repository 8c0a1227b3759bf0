"""Handoffs during a live call, with the real offline stack and the desks of `channels/`:
the call stays up (same session, same transport), the agent changes (instructions, tools,
voice), and the new agent answers the caller's next turn."""

from __future__ import annotations

from typing import Any

import pytest

from tests.desks.desk_calls import call_desk, example_desks, offline_models
from voicehub.core.events import EventKind
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.handoff import HANDOFF_TOOL
from voicehub.orchestration.state import get_conversation_state


@pytest.fixture(scope="module", autouse=True)
def loaded() -> None:
    offline_models()  # load the models before the first test's clock starts


def tool_ids(session: Any) -> list[str]:
    return [tool.name for tool in session.tools]


def voice_of(session: Any) -> Any:
    """The live agent's own TTS, or None when it speaks with the session's."""
    return None if session.voice is session.tts else session.voice


@pytest.mark.slow
async def test_a_handoff_keeps_the_call_and_changes_the_agent() -> None:
    desk = example_desks()["triage"]
    espeak = offline_models()["espeak"]
    async with Hub() as hub:
        call = await call_desk(hub, desk, "triage:voice-1")
        session, transport = call.session, call.transport
        await call.agent_said("What seems to be the problem?")  # the desk's greeting
        assert session.agent.id == "triage"
        assert session.agent.instructions.startswith("You answer")
        assert tool_ids(session) == ["transfer_call", "take_message", HANDOFF_TOOL]
        assert voice_of(session) is None  # the session's voice

        await call.caller_says("my internet is broken")
        await call.agent_said("Let me pass you to a technician")  # triage, before leaving
        await call.agent_said("Technical support here")  # the technician, on entering

        # Same call, another agent: its instructions, its tools (ask_user, a handoff limited
        # to the resolver) and its voice; the conversation so far came along.
        assert call.session is session and session.activity.snapshot().session_live
        assert session.agent.id == "handler"
        assert session.agent.instructions.startswith("You are the technician")
        assert tool_ids(session) == ["ask_user", HANDOFF_TOOL]
        [handoff] = [t for t in session.tools if t.name == HANDOFF_TOOL]
        assert handoff.spec.parameters["properties"]["target"]["enum"] == ["resolver"]
        assert voice_of(session) is espeak
        said = [m.content for m in session.history.messages()]
        assert any("broken" in text for text in said)
        state = get_conversation_state(hub.room("triage:voice-1"))
        assert (state.phase, state.active_agent_id) == ("handling", "handler")

        # The technician asks at once; then the next turn is the technician's: triage would
        # not know "fixed".
        await call.agent_said("Have you restarted your router")
        await call.caller_says("yes")
        await call.agent_said("Which service is affected")
        await call.caller_says("internet")
        await call.agent_said("I have reset your Internet line")
        await call.caller_says("that fixed it")
        await call.agent_said("Great. Let me pass you on to close your case.")
        await call.agent_said("I'm closing your case")
        assert session.agent.id == "resolver"
        assert voice_of(session) is None  # back to the desk's voice
        assert tool_ids(session) == [HANDOFF_TOOL]

        history = await hub.history("triage:voice-1")
        handoffs = [e.metadata["handoff"] for e in history if e.kind is EventKind.SYSTEM]
        assert [(h["from_agent"], h["to_agent"]) for h in handoffs] == [
            ("triage", "handler"),
            ("handler", "resolver"),
        ]
        heard = " ".join(
            e.text for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"
        )  # one turn each, or (on a loaded machine) a turn split by a late VAD and joined
        assert heard.index("broken") < heard.index("fixed")
        # Each handoff call, and the line said while leaving, is recorded under the agent
        # that made it, not the one it handed to.
        calls = [e for e in history if e.kind is EventKind.TOOL_CALL]
        assert [e.source for e in calls if e.metadata["tool"] == HANDOFF_TOOL] == [
            "triage",
            "handler",
        ]
        [leaving] = [e for e in history if "pass you to a technician" in e.text]
        assert leaving.source == "triage"
        assert transport.acked == transport.marks  # every line played out, none cut
        await session.aclose()


@pytest.mark.slow
async def test_a_caller_who_calls_back_gets_the_agent_they_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    desk = example_desks()["swarm"]
    async with Hub() as hub:
        call = await call_desk(hub, desk, "swarm:voice-1")
        await call.agent_said("Are you calling about buying")
        await call.caller_says("I have a question about my invoice")
        await call.agent_said("Billing here")
        assert call.session.agent.id == "billing"
        await call.session.aclose()

        # While nobody is on the line the conversation moves on (a text handoff, say); the
        # closed call no longer follows it.
        assert desk.handoff is not None
        moved = await desk.handoff.handler_for(hub).handle("swarm:voice-1", "billing", "support")
        assert moved.accepted
        assert "handoff listener failed" not in caplog.text

        again = await call_desk(hub, desk, "swarm:voice-1")
        assert again.session.agent.id == "support"  # where the conversation is now
        assert again.session.greeting is None  # a resumed conversation is not greeted again
        assert tool_ids(again.session) == [HANDOFF_TOOL]
        await again.session.aclose()


async def test_a_voice_the_call_does_not_have_is_named_at_start() -> None:
    async with Hub() as hub:
        with pytest.raises(ConfigError, match="agent 'handler' speaks with voice 'espeak'"):
            await call_desk(hub, example_desks()["triage"], "triage:voice-2", voices={})


async def test_a_delegating_desk_runs_its_front_agent_on_the_call() -> None:
    desk = example_desks()["research"]
    async with desk.make_hub() as hub:
        # The conversation was a text chat first: its agent channel would answer every
        # transcript a second time, so the call takes it out.
        room = await hub.create_room("research:voice-1")
        assert "desk" in room.channels
        call = await call_desk(hub, desk, "research:voice-1")
        assert "desk" not in room.channels
        assert call.session.agent.id == "desk"
        assert tool_ids(call.session) == [
            "search_knowledge",
            "delegate_workers",
            "check_tasks",
            "cancel_task",
        ]
        assert call.session.greeting is None  # the conversation existed already
        assert room.metadata["desk"] == "research"
        await call.session.aclose()
