"""The pipeline and swarm desks of `channels/`, end to end in text rooms: handoffs between
their agents, a refused handoff with its reason, and ask_user typed instead of spoken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.core.room import Room
from voicehub.desks.conversation import StagedPipeline
from voicehub.desks.desk import Desk, DeskOrchestration, load_desks
from voicehub.hub import Hub
from voicehub.orchestration.handoff import HANDOFF_TOOL
from voicehub.orchestration.pipeline import handoff_handler_of
from voicehub.orchestration.state import get_conversation_state
from voicehub.orchestration.swarm import Swarm

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
GUARD = 10.0  # seconds; only a hang ever waits this long


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return load_desks(CHANNELS)


@dataclass
class TextRoom:
    hub: Hub
    room: Room
    text: TextChannel

    async def say(self, words: str) -> list[tuple[str, str]]:
        """Send `words`; return (agent, text) of every answer it got."""
        await asyncio.wait_for(self.text.send(self.room, words), GUARD)
        return [(e.source, e.text) for e in self.text.pending(self.room.id)]

    async def next_message(self) -> tuple[str, str]:
        event = await asyncio.wait_for(self.text.receive(self.room.id), GUARD)
        return event.source, event.text

    @property
    def agent(self) -> str | None:
        return get_conversation_state(self.room).active_agent_id


OpenRoom = Callable[[Desk], Awaitable[TextRoom]]


@pytest.fixture
async def open_room() -> AsyncIterator[OpenRoom]:
    hubs: list[Hub] = []

    async def open_(desk: Desk) -> TextRoom:
        hub = desk.make_hub(clock=VirtualClock())  # ask_user timeouts never fire
        hubs.append(hub)
        await hub.start()
        room = await hub.create_room("chat-1")
        text = TextChannel("web")
        await room.attach(text)
        return TextRoom(hub, room, text)

    yield open_
    for hub in hubs:
        await asyncio.wait_for(hub.aclose(), GUARD)


# -- building --------------------------------------------------------------------------------


def tool_names(agent: Any) -> list[str]:
    return [tool.name for tool in agent.tools]


def test_the_triage_desk_runs_a_staged_pipeline(desks: dict[str, Desk]) -> None:
    desk = desks["triage"]
    strategy = desk.orchestration()
    assert isinstance(strategy, StagedPipeline) and strategy is desk.handoff
    assert strategy.pipeline.phases == ["intake", "handling", "resolution"]
    assert [desk.handoff_targets(a) for a in ("triage", "handler", "resolver")] == [
        ["handler"],
        ["resolver"],
        ["handler"],  # the resolver may send the caller back
    ]
    # The strategy runs the agents with what the desk adds (ask_user for the handler only).
    members = {agent.id: tool_names(agent) for agent in strategy.agents()}
    assert members == {
        "triage": ["transfer_call", "take_message"],
        "handler": ["ask_user"],
        "resolver": [],
    }
    assert tool_names(desk.agents["handler"]) == []  # the desk's own agent stays plain
    assert desk.entry_agent.id == "triage" and desk.front_agent.id == "triage"
    assert desk.handoff_instruction == "You have just been handed the caller: introduce yourself."
    assert isinstance(desk.call_orchestration(), DeskOrchestration)


def test_the_swarm_desk_runs_a_swarm(desks: dict[str, Desk]) -> None:
    desk = desks["swarm"]
    strategy = desk.orchestration()
    assert isinstance(strategy, Swarm) and strategy.entry_id == "sales"
    assert desk.handoff_targets("support") == ["sales", "billing"]
    assert desk.agents["billing"].voice == "espeak"
    assert desk.tools_for("sales") == ()  # no delegation, no ask_user on this desk


async def test_active_agent_follows_the_conversation_state(
    desks: dict[str, Desk], open_room: OpenRoom
) -> None:
    desk = desks["triage"]
    chat = await open_room(desk)
    assert desk.active_agent(chat.room).id == "triage"
    turn = asyncio.create_task(chat.text.send(chat.room, "my internet is broken"))
    await chat.next_message()  # triage passes the caller on
    assert (await chat.next_message())[0] == "handler"  # who asks at once
    assert desk.active_agent(chat.room).id == "handler"
    await chat.text.send(chat.room, "yes")
    await chat.next_message()  # the second question
    await chat.text.send(chat.room, "internet")
    await asyncio.wait_for(turn, GUARD)
    assert desks["research"].active_agent(chat.room).id == "desk"  # no strategy: the front


# -- the triage desk in a text room -------------------------------------------------------------


async def test_triage_hands_off_asks_and_resolves(
    desks: dict[str, Desk], open_room: OpenRoom
) -> None:
    chat = await open_room(desks["triage"])
    handler = handoff_handler_of(chat.hub, chat.room.id)
    assert handler is not None
    followed: list[str | None] = []
    handler.on_accepted(lambda room_id, state, target: followed.append(target))

    assert await chat.say("hi") == [
        ("triage", "Hello! Tell me what is wrong, for example: my internet is broken.")
    ]
    # One complaint is enough: the technician, handed the caller, asks at once; the answers
    # are typed, and none of them gets an agent reply.
    turn = asyncio.create_task(chat.text.send(chat.room, "my internet is broken"))
    assert await chat.next_message() == (
        "triage",
        "I'm sorry to hear that. Let me pass you to a technician.",
    )
    source, question = await chat.next_message()
    assert source == "handler"
    assert question == (
        "Technical support here. Let me check a couple of things.\n"
        "Have you restarted your router, yes or no?"
    )
    assert chat.agent == "handler" and followed == ["handler"]
    await chat.text.send(chat.room, "Yes, I did.")
    assert (await chat.next_message())[1].startswith("Which service is affected")
    await chat.text.send(chat.room, "banana")
    _, again = await chat.next_message()
    assert again.startswith("Sorry, I didn't catch that.\nWhich service is affected")
    assert again.endswith("Please say the option or its number.")
    await chat.text.send(chat.room, "the phone one")
    await asyncio.wait_for(turn, GUARD)
    assert chat.text.pending(chat.room.id)[-1].text == (
        "Thanks. I have reset your Phone line. Please try it now, and tell me if that fixed it."
    )
    history = await chat.hub.history(chat.room.id)
    answers = [e for e in history if "_answer_to" in e.metadata]
    assert [e.text for e in answers] == ["Yes, I did.", "banana", "the phone one"]

    # Forward only: the technician cannot send the caller back to triage, and says why.
    [(source, refusal)] = await chat.say("I want to start over")
    assert source == "handler"
    assert refusal.startswith("I can't send you back to the start.")
    assert "handoff rejected: unknown or unreachable target 'triage'" in refusal
    assert refusal.endswith("Valid targets: resolver.")
    assert chat.agent == "handler"

    assert await chat.say("that fixed it") == [
        ("handler", "Great. Let me pass you on to close your case."),
        ("resolver", "Hello, I'm closing your case. Is there anything else I can help with?"),
    ]
    # ...but the resolver may return the caller to the technician (can_return_to), who
    # asks again.
    turn = asyncio.create_task(chat.text.send(chat.room, "it is broken again"))
    assert (await chat.next_message())[0] == "resolver"
    source, question = await chat.next_message()
    assert source == "handler" and question.endswith("Have you restarted your router, yes or no?")
    await chat.text.send(chat.room, "no")
    assert (await chat.next_message())[1].startswith("Which service is affected")
    await chat.text.send(chat.room, "internet")
    await asyncio.wait_for(turn, GUARD)
    state = get_conversation_state(chat.room)
    assert (state.phase, state.active_agent_id, state.handoff_count) == ("handling", "handler", 3)
    assert [(t.from_agent, t.to_agent) for t in state.phase_history] == [
        ("triage", "handler"),
        ("handler", "resolver"),
        ("resolver", "handler"),
    ]
    assert followed == ["handler", "resolver", "handler"]
    calls = [e.metadata["tool"] for e in history if e.kind is EventKind.TOOL_CALL]
    assert calls == [HANDOFF_TOOL, "ask_user"]


# -- the swarm desk in a text room ----------------------------------------------------------------


async def test_swarm_agents_hand_the_caller_to_each_other(
    desks: dict[str, Desk], open_room: OpenRoom
) -> None:
    chat = await open_room(desks["swarm"])
    [(source, pitch)] = await chat.say("I want to buy a new phone")
    assert source == "sales" and pitch.startswith("Our fibre plan")

    assert await chat.say("I have a question about my invoice") == [
        ("sales", "That's one for billing. Transferring you now."),
        ("billing", "Billing here. How can I help with your account?"),
    ]
    assert await chat.say("I need a refund") == [
        ("billing", "I've found your last invoice and refunded the duplicate charge.")
    ]
    assert await chat.say("something is broken") == [
        ("billing", "That's one for support. Transferring you now."),
        ("support", "Support here. What is not working?"),
    ]
    assert await chat.say("I want to upgrade") == [
        ("support", "That's one for sales. Transferring you now."),
        ("sales", "Sales here. Are you looking to buy or upgrade?"),
    ]
    state = get_conversation_state(chat.room)
    assert [(t.from_agent, t.to_agent) for t in state.phase_history] == [
        ("sales", "billing"),
        ("billing", "support"),
        ("support", "sales"),
    ]
    assert state.phase == "intake"  # a swarm does not move through phases
