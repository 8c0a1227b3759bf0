"""A text room end to end: TextChannel in, AgentChannel with a ScriptedLLM, reply out."""

from __future__ import annotations

import json

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool
from voicehub.core.channels import TextChannel
from voicehub.core.events import EventKind
from voicehub.hub import Hub


def opening_hours(day: str) -> dict[str, str]:
    """Opening hours for a day of the week."""
    return {"day": day, "hours": "9:00-17:00" if day.lower() != "sunday" else "closed"}


def desk_agent() -> Agent:
    llm = ScriptedLLM(
        [
            {"match": ["hello", "hi"], "say": "Hello! How can I help?"},
            {
                "regex": r"open on (?P<day>\w+)",
                "say": "Let me check.",
                "tool": "opening_hours",
                "arguments": {"day": "{day}"},
                "reply": "On {result.day} we are open {result.hours}.",
            },
        ],
        fallback="Sorry, I didn't get that.",
    )
    return Agent(
        id="desk", instructions="You run the front desk.", llm=llm, tools=(Tool(opening_hours),)
    )


async def test_message_in_reply_out() -> None:
    hub = Hub()
    room = await hub.create_room("chat")
    text = TextChannel("web")
    await room.attach(text)
    await room.attach(AgentChannel(desk_agent()))

    await text.send(room, "hi there")
    reply = await text.receive(room.id)
    assert reply.text == "Hello! How can I help?"
    assert reply.source == "desk"
    assert reply.role == "assistant"

    await text.send(room, "what's this?")
    assert [e.text for e in text.pending(room.id)] == ["Sorry, I didn't get that."]


async def test_tool_call_events_are_recorded_in_order() -> None:
    hub = Hub()
    room = await hub.create_room("chat")
    text = TextChannel("web")
    await room.attach(text)
    await room.attach(AgentChannel(desk_agent()))

    await text.send(room, "are you open on Monday?")

    # Only spoken messages reach the text channel: the line said alongside the tool call
    # comes first (before the tool runs), the final answer after the tool result.
    replies = text.pending(room.id)
    assert [e.text for e in replies] == ["Let me check.", "On Monday we are open 9:00-17:00."]
    history = await hub.history(room.id)
    assert [(e.kind, e.source) for e in history] == [
        (EventKind.MESSAGE, "web"),
        (EventKind.MESSAGE, "desk"),
        (EventKind.TOOL_CALL, "desk"),
        (EventKind.TOOL_RESULT, "desk"),
        (EventKind.MESSAGE, "desk"),
    ]
    call, result = history[2], history[3]
    assert json.loads(call.text) == {"day": "Monday"}
    assert call.metadata["tool"] == "opening_hours"
    assert result.metadata == {
        "tool": "opening_hours",
        "call_id": call.metadata["call_id"],
        "is_error": False,
    }
    assert json.loads(result.text) == {"day": "Monday", "hours": "9:00-17:00"}
    assert [e.seq for e in history] == [1, 2, 3, 4, 5]


async def test_agent_does_not_answer_agents_or_itself() -> None:
    hub = Hub()
    room = await hub.create_room("chat")
    text = TextChannel("web")
    await room.attach(text)
    await room.attach(AgentChannel(desk_agent()))
    await room.attach(AgentChannel(desk_agent().model_copy(update={"id": "echo"})))

    await text.send(room, "hello")
    # Each agent answers the user once; neither answers the other's reply.
    replies = sorted((e.source, e.text) for e in text.pending(room.id))
    assert replies == [("desk", "Hello! How can I help?"), ("echo", "Hello! How can I help?")]


async def test_agent_sees_the_conversation_so_far() -> None:
    hub = Hub()
    room = await hub.create_room("chat")
    text = TextChannel("web")
    await room.attach(text)
    llm = ScriptedLLM([{"match": ["again"], "say": "You said: {last_user}"}])
    await room.attach(AgentChannel(Agent(id="parrot", llm=llm)))

    await text.send(room, "say it again")
    assert [e.text for e in text.pending(room.id)] == ["You said: say it again"]


async def test_routed_event_is_answered_only_by_its_target() -> None:
    hub = Hub()
    room = await hub.create_room("chat")
    text = TextChannel("web")
    await room.attach(text)
    await room.attach(AgentChannel(desk_agent()))
    await room.attach(AgentChannel(desk_agent().model_copy(update={"id": "other"})))

    await text.send(room, "hello", _routed_to="other")
    assert [e.source for e in text.pending(room.id)] == ["other"]
