"""ConversationRouter: affinity, rules, default; the routing hook; the supervisor."""

from __future__ import annotations

from typing import Any

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.events import ChannelType, Event, EventKind, message
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.room import Room
from voicehub.hub import Hub
from voicehub.orchestration.router import (
    ConversationRouter,
    RoutingConditions,
    RoutingRule,
)
from voicehub.orchestration.state import (
    HUMAN,
    ConversationState,
    set_conversation_state,
)


def agent_channel(agent_id: str, answer: str | None = None) -> AgentChannel:
    llm = ScriptedLLM(fallback=answer if answer is not None else f"{agent_id} here")
    return AgentChannel(Agent(id=agent_id, llm=llm))


async def room_with(*agent_ids: str) -> tuple[Hub, Room]:
    hub = Hub()
    room = await hub.create_room("desk")
    for agent_id in agent_ids:
        await room.attach(agent_channel(agent_id))
    return hub, room


def rule(agent_id: str, priority: int = 0, **conditions: object) -> RoutingRule:
    return RoutingRule(
        agent_id=agent_id,
        conditions=RoutingConditions.model_validate(conditions),
        priority=priority,
    )


async def test_affinity_beats_rules_while_the_active_agent_is_in_the_room() -> None:
    _, room = await room_with("billing", "support")
    router = ConversationRouter([rule("support")], default_agent_id="support")
    state = ConversationState(active_agent_id="billing")

    assert router.select(message("hi"), room, state) == "billing"

    await room.detach("billing")
    assert router.select(message("hi"), room, state) == "support"


async def test_rules_run_in_priority_order_then_the_default() -> None:
    _, room = await room_with("a", "b", "c", "fallback")
    router = ConversationRouter(
        [
            rule("c", priority=10, intents={"billing"}),
            rule("a", priority=5, intents={"other"}),
            rule("b", priority=5, intents={"billing"}),
            rule("a", priority=5, intents={"billing"}),  # same priority: given order kept
        ],
        default_agent_id="fallback",
    )
    state = ConversationState()
    assert router.select(message("x", intent="billing"), room, state) == "b"
    assert router.select(message("x", intent="other"), room, state) == "a"
    assert router.select(message("x", intent="sales"), room, state) == "fallback"


async def test_conditions_within_a_rule_are_anded() -> None:
    _, room = await room_with("billing-sms", "triage")
    seen: list[tuple[str, str, str]] = []

    def business_hours(event: Event, where: Room, state: ConversationState) -> bool:
        seen.append((event.text, where.id, state.phase))
        return not event.metadata.get("after_hours", False)

    router = ConversationRouter(
        [
            rule(
                "billing-sms",
                phases={"handling"},
                channel_types={ChannelType.SMS},
                intents={"billing"},
                source_channel_ids={"sms-gw"},
                custom=business_hours,
            )
        ],
        default_agent_id="triage",
    )
    handling = ConversationState(phase="handling")

    def sms(text: str, **metadata: Any) -> Event:
        return message(text, source="sms-gw", source_type=ChannelType.SMS, **metadata)

    assert router.select(sms("all", intent="billing"), room, handling) == "billing-sms"
    assert seen == [("all", "desk", "handling")]
    # Each condition alone failing is enough to fall through to the default.
    assert router.select(sms("phase", intent="billing"), room, ConversationState()) == "triage"
    assert router.select(sms("intent", intent="sales"), room, handling) == "triage"
    web = message("type", intent="billing", source="sms-gw")  # TEXT channel type
    assert router.select(web, room, handling) == "triage"
    other = message("src", intent="billing", source="other", source_type=ChannelType.SMS)
    assert router.select(other, room, handling) == "triage"
    late = sms("custom", intent="billing", after_hours=True)
    assert router.select(late, room, handling) == "triage"


async def test_only_agents_in_the_room_are_chosen() -> None:
    _, room = await room_with("present")
    router = ConversationRouter([rule("absent")], default_agent_id="also-absent")
    assert router.select(message("hi"), room, ConversationState()) is None

    router = ConversationRouter([rule("absent"), rule("present", priority=1)])
    assert router.select(message("hi"), room, ConversationState()) == "present"


async def test_a_human_conversation_routes_to_nobody() -> None:
    _, room = await room_with("support")
    router = ConversationRouter(default_agent_id="support")
    state = ConversationState(active_agent_id="support").transition("escalation", HUMAN, "r")
    assert router.select(message("hello?"), room, state) == HUMAN


async def test_the_hook_stamps_user_events_and_never_agent_events() -> None:
    hub, room = await room_with("triage", "billing")
    ConversationRouter(default_agent_id="triage", supervisor_id="boss").install(
        hub, [], room_id=room.id
    )
    await room.attach(agent_channel("boss", answer=""))  # a quiet supervisor
    text = TextChannel("web")
    await room.attach(text)

    await text.send(room, "hello")
    await room.post(
        Event(text="note", source="billing", source_type=ChannelType.AGENT, role="assistant")
    )
    await room.post(Event(kind=EventKind.SYSTEM, text="sys", source="hub", role="system"))

    history = await hub.history(room.id)
    user, reply, agent_note, system = history
    assert user.metadata == {"_routed_to": "triage", "_always_process": ["boss"]}
    assert (reply.source, reply.text) == ("triage", "triage here")
    assert "_routed_to" not in agent_note.metadata
    assert "_routed_to" not in system.metadata
    assert [e.text for e in text.pending(room.id)] == ["triage here", "note"]


async def test_an_explicit_target_set_by_the_sender_wins() -> None:
    hub, room = await room_with("triage", "billing")
    ConversationRouter(default_agent_id="triage").install(hub, [], room_id=room.id)
    text = TextChannel("web")
    await room.attach(text)

    await text.send(room, "for billing", _routed_to="billing")
    assert [e.source for e in text.pending(room.id)] == ["billing"]


async def test_only_the_routed_agent_and_the_supervisor_answer() -> None:
    hub = Hub()
    room = await hub.create_room("desk")
    channels = [agent_channel("triage"), agent_channel("billing"), agent_channel("boss")]
    for channel in channels:
        await room.attach(channel)
    text = TextChannel("web")
    await room.attach(text)
    router = ConversationRouter(
        [rule("billing", intents={"billing"})], default_agent_id="triage", supervisor_id="boss"
    )
    router.install(hub, channels, room_id=room.id)

    await text.send(room, "hi")
    assert sorted(e.source for e in text.pending(room.id)) == ["boss", "triage"]
    await text.send(room, "my bill", intent="billing")
    assert sorted(e.source for e in text.pending(room.id)) == ["billing", "boss"]


async def test_the_router_hook_runs_before_user_hooks() -> None:
    hub, room = await room_with("triage")
    seen: list[object] = []

    async def observer(event: Event, context: HookContext) -> None:
        if not event.from_agent:
            seen.append(event.metadata.get("_routed_to"))

    hub.hooks.add(HookTrigger.BEFORE_BROADCAST, observer, priority=0)
    ConversationRouter(default_agent_id="triage").install(hub, [], room_id=room.id)

    await room.post(message("hi"))
    assert seen == ["triage"]


async def test_a_room_scoped_router_leaves_other_rooms_alone() -> None:
    hub, room = await room_with("triage")
    other = await hub.create_room("other")
    await other.attach(agent_channel("triage"))
    ConversationRouter(default_agent_id="triage").install(hub, [], room_id=room.id)

    routed = await room.post(message("a"))
    unrouted = await other.post(message("b"))
    assert routed is not None and routed.metadata["_routed_to"] == "triage"
    assert unrouted is not None and "_routed_to" not in unrouted.metadata


async def test_the_hook_reads_the_current_state() -> None:
    hub, room = await room_with("triage", "billing")
    ConversationRouter(default_agent_id="triage").install(hub, [], room_id=room.id)
    await set_conversation_state(room, ConversationState(active_agent_id="billing"))

    routed = await room.post(message("hi"))
    assert routed is not None and routed.metadata["_routed_to"] == "billing"
