"""The handoff protocol: the tool, validation with reasons the model sees, state, events,
hooks, listeners, and the context the next agent receives."""

from __future__ import annotations

import json
from typing import Any

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import LLM, ChatMessage
from voicehub.agents.memory import SlidingWindowMemory
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import ToolContext
from voicehub.core.channels import TextChannel
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.room import Room
from voicehub.hub import Hub
from voicehub.orchestration.handoff import (
    HANDOFF_TOOL,
    HandoffHandler,
    HandoffMemoryProvider,
    handoff_tool,
    setup_handoff,
)
from voicehub.orchestration.router import ConversationRouter
from voicehub.orchestration.state import (
    HUMAN,
    STATE_KEY,
    ConversationState,
    get_conversation_state,
    set_conversation_state,
)
from voicehub_dev.fakes.recording_llm import RecordingLLM


def handoff_rule(phrase: str, target: str, **arguments: Any) -> dict[str, Any]:
    """A scripted rule: on `phrase`, call handoff_conversation; then say the tool result."""
    return {
        "match": [phrase],
        "tool": HANDOFF_TOOL,
        "arguments": {
            "target": target,
            "reason": f"user said {phrase}",
            "summary": "User said: {message}",
            **arguments,
        },
        "reply": "{result}",
    }


def agent(agent_id: str, *rules: dict[str, Any], llm: LLM | None = None) -> Agent:
    return Agent(
        id=agent_id,
        instructions=f"You are the {agent_id} desk.",
        description=f"handles {agent_id} questions",
        llm=llm or ScriptedLLM(list(rules), fallback=f"{agent_id} here"),
    )


class Desk:
    """A text room with agents, a router installed on it, and a web text channel."""

    def __init__(self, hub: Hub, room: Room, text: TextChannel, handler: HandoffHandler) -> None:
        self.hub, self.room, self.text, self.handler = hub, room, text, handler

    async def say(self, text: str) -> list[tuple[str, str]]:
        await self.text.send(self.room, text)
        return [(e.source, e.text) for e in self.text.pending(self.room.id)]

    @property
    def state(self) -> ConversationState:
        return get_conversation_state(self.room)

    async def tool_results(self) -> list[Event]:
        history = await self.hub.history(self.room.id)
        return [e for e in history if e.kind is EventKind.TOOL_RESULT]


async def desk(*agents: Agent, start: str = "triage", **install: Any) -> Desk:
    hub = Hub()
    room = await hub.create_room("desk")
    channels = [
        AgentChannel(a, memory=HandoffMemoryProvider(SlidingWindowMemory())) for a in agents
    ]
    for channel in channels:
        await room.attach(channel)
    text = TextChannel("web")
    await room.attach(text)
    router = ConversationRouter(default_agent_id=start)
    handler = router.install(hub, channels, room_id=room.id, **install)
    await set_conversation_state(room, ConversationState(active_agent_id=start))
    return Desk(hub, room, text, handler)


async def test_an_accepted_handoff_sends_the_next_message_to_the_new_agent() -> None:
    d = await desk(agent("triage", handoff_rule("invoice", "billing")), agent("billing"))

    replies = await d.say("my invoice is wrong")
    assert [source for source, _ in replies] == ["triage"]
    accepted = json.loads(replies[0][1])
    assert accepted["status"] == "accepted" and accepted["target"] == "billing"

    assert d.state.active_agent_id == "billing"
    assert d.state.handoff_summary == "User said: my invoice is wrong"
    stored = await d.hub.store.get_room(d.room.id)
    assert stored is not None
    assert stored.metadata[STATE_KEY]["active_agent_id"] == "billing"  # persisted

    system = [e for e in await d.hub.history(d.room.id) if e.kind is EventKind.SYSTEM]
    assert [e.text for e in system] == [
        "Conversation handed off from triage to billing: user said invoice"
    ]
    assert system[0].metadata["handoff"]["channel_escalation"] == "same"

    assert await d.say("hello?") == [("billing", "billing here")]
    assert await d.say("still there?") == [("billing", "billing here")]  # sticky


async def test_an_unknown_target_is_rejected_and_the_model_sees_why() -> None:
    d = await desk(agent("triage", handoff_rule("refund", "wizard")), agent("billing"))
    rejections: list[Event] = []

    async def on_rejected(event: Event, context: HookContext) -> None:
        rejections.append(event)

    d.hub.hooks.add(HookTrigger.ON_HANDOFF_REJECTED, on_rejected)

    replies = await d.say("I want a refund")

    [result] = await d.tool_results()
    assert result.metadata["is_error"] is True
    assert result.text == (
        "error in tool handoff_conversation: handoff rejected: unknown or unreachable target "
        "'wizard'. Valid targets: billing."
    )
    assert replies == [("triage", result.text)]  # the scripted model reads the reason out
    assert d.state.active_agent_id == "triage" and d.state.handoff_count == 0
    assert [e.metadata["handoff"]["target"] for e in rejections] == ["wizard"]
    assert await d.say("hi") == [("triage", "triage here")]


async def test_a_disallowed_phase_transition_is_rejected() -> None:
    d = await desk(
        agent("triage", handoff_rule("done", "closer", next_phase="resolution")),
        agent("closer"),
        allowed_transitions={"intake": {"handling"}, "handling": {"resolution"}},
    )
    await d.say("I'm done")

    [result] = await d.tool_results()
    assert "phase 'intake' cannot move to 'resolution' (allowed next phases: handling)" in (
        result.text
    )
    assert "Valid targets: closer." in result.text
    assert d.state.phase == "intake" and d.state.active_agent_id == "triage"


async def test_aliases_and_the_phase_map_pick_the_agent_and_phase() -> None:
    d = await desk(
        agent("triage", handoff_rule("bill", "accounts")),
        agent("billing"),
        agent_aliases={"accounts": "billing"},
        phase_map={"billing": "handling"},
    )
    await d.say("a bill question")
    assert d.state.active_agent_id == "billing"
    assert d.state.phase == "handling"


async def test_an_agent_cannot_hand_off_to_itself() -> None:
    d = await desk(agent("triage", handoff_rule("loop", "triage")), agent("billing"))
    await d.say("loop")
    [result] = await d.tool_results()
    assert "'triage' already has the conversation" in result.text


async def test_human_takeover_silences_the_agents_until_handed_back() -> None:
    d = await desk(
        agent("triage", handoff_rule("person", HUMAN, next_phase="escalation")),
        agent("billing"),
        allow_human=True,
    )
    await d.say("let me talk to a person")
    assert d.state.awaiting_human and d.state.active_agent_id is None
    assert d.state.phase == "escalation"

    assert await d.say("hello?") == []  # no agent answers while a person has the call

    back = await d.handler.handle(d.room.id, HUMAN, "billing", "sorted", "Refund approved")
    assert back.accepted
    assert await d.say("thanks") == [("billing", "billing here")]


async def test_human_target_is_rejected_unless_enabled() -> None:
    d = await desk(agent("triage", handoff_rule("person", HUMAN)), agent("billing"))
    await d.say("a person please")
    [result] = await d.tool_results()
    assert "handing off to a human is not enabled on this desk" in result.text
    assert d.state.active_agent_id == "triage"


async def test_handoff_and_phase_transition_hooks_fire() -> None:
    d = await desk(
        agent(
            "triage",
            handoff_rule("invoice", "billing", next_phase="handling"),
            handoff_rule("colleague", "sales"),
        ),
        agent("billing"),
        agent("sales"),
    )
    fired: list[tuple[str, str, str]] = []

    async def record(event: Event, context: HookContext) -> None:
        details = event.metadata["handoff"]
        fired.append((context.trigger.value, details["to_agent"], details["to_phase"]))

    for trigger in (HookTrigger.ON_HANDOFF, HookTrigger.ON_PHASE_TRANSITION):
        d.hub.hooks.add(trigger, record, room_id=d.room.id)

    await d.say("invoice")
    # A handoff back within the same phase is a handoff, not a phase transition.
    await d.handler.handle(d.room.id, "billing", "triage", "misrouted", "", "handling")
    await d.say("a colleague")
    assert fired == [
        ("on_handoff", "billing", "handling"),
        ("on_phase_transition", "billing", "handling"),
        ("on_handoff", "triage", "handling"),
        ("on_handoff", "sales", "handling"),
    ]


async def test_listeners_hear_accepted_handoffs_in_their_room() -> None:
    d = await desk(agent("triage", handoff_rule("invoice", "billing")), agent("billing"))
    heard: list[tuple[str, str | None, int]] = []

    def switch(room_id: str, state: ConversationState, target: str | None) -> None:
        heard.append((room_id, target, state.handoff_count))

    async def broken(room_id: str, state: ConversationState, target: str | None) -> None:
        raise RuntimeError("listener bug")

    d.handler.on_accepted(broken)
    unsubscribe = d.handler.on_accepted(switch, room_id=d.room.id)
    d.handler.on_accepted(switch, room_id="another-room")

    await d.say("invoice")
    assert heard == [("desk", "billing", 1)]
    assert d.state.active_agent_id == "billing"  # the broken listener changed nothing

    unsubscribe()
    await d.handler.handle(d.room.id, "billing", "triage", "back", "")
    assert heard == [("desk", "billing", 1)]


async def test_the_next_agent_sees_the_handoff_summary_first() -> None:
    billing_llm = RecordingLLM(ScriptedLLM(fallback="Billing here, I see the problem."))
    triage_llm = RecordingLLM(
        ScriptedLLM(
            [handoff_rule("charged", "billing", summary="Charged twice; account 12345.")],
            fallback="triage here",
        )
    )
    d = await desk(agent("triage", llm=triage_llm), agent("billing", llm=billing_llm))

    await d.say("I was charged twice")
    assert billing_llm.calls == []
    assert await d.say("can you fix it?") == [("billing", "Billing here, I see the problem.")]

    first = billing_llm.calls[0]
    assert first[0] == ChatMessage(role="system", content="You are the billing desk.")
    assert first[1] == ChatMessage(
        role="user", content="[Context from previous agent (triage)]: Charged twice; account 12345."
    )
    assert first[-1] == ChatMessage(role="user", content="can you fix it?")
    assert not any("Context from previous agent" in m.content for c in triage_llm.calls for m in c)


def test_the_tool_schema_lists_reachable_targets() -> None:
    handler = HandoffHandler(Hub())
    spec = handoff_tool(handler, ["billing", HUMAN]).spec
    properties = spec.parameters["properties"]
    assert spec.name == "handoff_conversation"
    assert properties["target"]["enum"] == ["billing", HUMAN]
    assert properties["channel_escalation"]["enum"] == ["same", "voice", "email", "sms"]
    assert properties["channel_escalation"]["default"] == "same"
    assert sorted(spec.parameters["required"]) == ["reason", "summary", "target"]
    assert "enum" not in handoff_tool(handler).spec.parameters["properties"]["target"]


async def test_bad_arguments_and_calls_outside_a_room_are_tool_errors() -> None:
    tool = handoff_tool(HandoffHandler(Hub()))
    arguments = {"target": "billing", "reason": "r", "summary": "s"}

    outside = await tool.invoke(arguments, ToolContext())
    assert outside.is_error and "needs a room" in outside.content

    fax = await tool.invoke({**arguments, "channel_escalation": "fax"}, ToolContext())
    assert fax.is_error and "channel_escalation" in fax.content


def test_setup_handoff_replaces_an_earlier_tool() -> None:
    handler = HandoffHandler(Hub())
    channel = AgentChannel(agent("triage"))
    setup_handoff(channel, handler, ["a"])
    setup_handoff(channel, handler, ["b"])
    [only] = channel.extra_tools
    assert only.spec.parameters["properties"]["target"]["enum"] == ["b"]


async def test_a_conversation_outside_the_graph_may_enter_it() -> None:
    # A fresh room starts in "intake", which this graph does not list.
    d = await desk(
        agent("triage", handoff_rule("code", "coder", next_phase="coding")),
        agent("coder"),
        allowed_transitions={"coding": {"review"}, "review": {"coding"}},
    )
    await d.say("write code")
    assert (d.state.phase, d.state.active_agent_id) == ("coding", "coder")


async def test_a_voice_session_without_agent_channels_follows_handoffs() -> None:
    # A voice session runs one agent itself: no AgentChannels in the room, so the handler is
    # told the agent ids, and the session switches agents from its listener.
    hub = Hub()
    room = await hub.create_room("call")
    await set_conversation_state(room, ConversationState(active_agent_id="sales"))
    handler = HandoffHandler(hub, agent_ids=["sales", "billing"])
    speaking = ["sales"]

    async def switch(room_id: str, state: ConversationState, target: str | None) -> None:
        speaking.append(target or "nobody")

    handler.on_accepted(switch, room_id=room.id)
    tool = handoff_tool(handler, ["billing"])
    context = ToolContext(hub=hub, room_id=room.id, agent_id="sales")

    result = await tool.invoke({"target": "billing", "reason": "r", "summary": "s"}, context)
    assert not result.is_error and json.loads(result.content)["target"] == "billing"
    assert speaking == ["sales", "billing"]
    assert get_conversation_state(room).active_agent_id == "billing"

    wrong = await tool.invoke({"target": "support", "reason": "r", "summary": "s"}, context)
    assert wrong.is_error and "Valid targets: billing." in wrong.content
