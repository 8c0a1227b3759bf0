"""Swarm: sales, support and billing hand a conversation back and forth."""

from __future__ import annotations

from typing import Any

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import LLM, ChatMessage
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.room import Room
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.handoff import HANDOFF_TOOL
from voicehub.orchestration.pipeline import handoff_handler_of
from voicehub.orchestration.state import ConversationState, get_conversation_state
from voicehub.orchestration.swarm import Swarm
from voicehub_dev.fakes.recording_llm import RecordingLLM


def to(phrase: str, target: str, summary: str) -> dict[str, Any]:
    return {
        "match": [phrase],
        "tool": HANDOFF_TOOL,
        "arguments": {"target": target, "reason": phrase, "summary": summary},
        "reply": "Let me get {result.target} for you.",
    }


def sales() -> Agent:
    rules = [
        to("invoice", "billing", "Customer on the Pro plan asks about an invoice."),
        to("broken", "support", "Customer reports something broken."),
        {"match": ["upgrade"], "say": "The Pro plan is 20 a month."},
    ]
    return Agent(
        id="sales",
        description="plans and prices",
        llm=ScriptedLLM(rules, fallback="Sales here, interested in a plan?"),
    )


def support(llm: LLM | None = None) -> Agent:
    rules = [to("price", "sales", "Customer wants pricing.")]
    return Agent(
        id="support",
        description="technical problems",
        llm=llm or ScriptedLLM(rules, fallback="Support here, what broke?"),
    )


def billing() -> Agent:
    rules = [
        {"match": ["invoice"], "say": "Your last invoice was paid."},
        to("upgrade", "sales", "Invoice settled; customer now wants to upgrade."),
    ]
    return Agent(
        id="billing",
        description="invoices and payments",
        llm=ScriptedLLM(rules, fallback="Billing here."),
    )


async def chat(room: Room, text: TextChannel, message: str) -> list[tuple[str, str]]:
    await text.send(room, message)
    return [(e.source, e.text) for e in text.pending(room.id)]


async def swarm_room(strategy: Swarm) -> tuple[Hub, Room, TextChannel]:
    hub = Hub(orchestration=strategy)
    room = await hub.create_room("shop")
    text = TextChannel("web")
    await room.attach(text)
    return hub, room, text


async def test_handoffs_back_and_forth() -> None:
    _, room, text = await swarm_room(Swarm([sales(), support(), billing()]))

    assert await chat(room, text, "hi") == [("sales", "Sales here, interested in a plan?")]
    assert await chat(room, text, "question about my invoice") == [
        ("sales", "Let me get billing for you.")
    ]
    assert await chat(room, text, "the invoice from May") == [
        ("billing", "Your last invoice was paid.")
    ]
    assert await chat(room, text, "now I want to upgrade") == [
        ("billing", "Let me get sales for you.")
    ]
    assert await chat(room, text, "upgrade me") == [("sales", "The Pro plan is 20 a month.")]
    assert await chat(room, text, "wait, the app is broken") == [
        ("sales", "Let me get support for you.")
    ]
    assert await chat(room, text, "it crashes") == [("support", "Support here, what broke?")]
    assert await chat(room, text, "still crashes") == [("support", "Support here, what broke?")]

    state = get_conversation_state(room)
    assert state.handoff_count == 3
    assert state.phase == "intake"  # phases do not constrain a swarm
    assert [(t.from_agent, t.to_agent) for t in state.phase_history] == [
        ("sales", "billing"),
        ("billing", "sales"),
        ("sales", "support"),
    ]


async def test_every_agent_can_reach_every_other() -> None:
    _, room, _ = await swarm_room(Swarm([sales(), support(), billing()]))
    targets = {}
    for channel_id, channel in room.channels.items():
        if isinstance(channel, AgentChannel):
            [tool] = channel.extra_tools
            targets[channel_id] = tool.spec.parameters["properties"]["target"]["enum"]
            assert channel.extra_tools[0].name == HANDOFF_TOOL
    assert targets == {
        "sales": ["support", "billing"],
        "support": ["sales", "billing"],
        "billing": ["sales", "support"],
    }
    description = room.channels["sales"].extra_tools[0].description  # type: ignore[attr-defined]
    assert "billing: invoices and payments" in description


async def test_entry_defaults_to_the_first_agent_and_can_be_chosen() -> None:
    assert Swarm([sales(), support()]).initial_state() == ConversationState(active_agent_id="sales")
    _, room, text = await swarm_room(Swarm([sales(), support(), billing()], entry="billing"))
    assert await chat(room, text, "hello") == [("billing", "Billing here.")]
    assert Swarm([sales(), support()], entry=support()).entry_id == "support"
    with pytest.raises(ConfigError, match=r"entry 'nobody' is not one of its agents"):
        Swarm([sales(), support()], entry="nobody")


async def test_the_next_agent_gets_the_summary_on_its_first_call() -> None:
    recorder = RecordingLLM(ScriptedLLM(fallback="Support here, what broke?"))
    _, room, text = await swarm_room(Swarm([sales(), support(recorder)]))

    await chat(room, text, "my app is broken")
    await chat(room, text, "it crashes on start")

    [first] = recorder.calls
    assert first[0] == ChatMessage(
        role="user",
        content="[Context from previous agent (sales)]: Customer reports something broken.",
    )
    assert first[-1] == ChatMessage(role="user", content="it crashes on start")


async def test_a_voice_session_can_follow_handoffs() -> None:
    hub, room, text = await swarm_room(Swarm([sales(), support(), billing()]))
    handoffs = handoff_handler_of(hub, room.id)
    assert handoffs is not None
    speaking: list[str | None] = ["sales"]

    async def switch_agent(room_id: str, state: ConversationState, target: str | None) -> None:
        speaking.append(target)

    handoffs.on_accepted(switch_agent, room_id=room.id)
    await chat(room, text, "invoice please")
    await chat(room, text, "upgrade")
    assert speaking == ["sales", "billing", "sales"]
