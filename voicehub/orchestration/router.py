"""The conversation router: which agent in a multi-agent room answers an inbound message.

Selection runs in three tiers: affinity (the active agent of the `ConversationState` keeps the
conversation while it is attached to the room), then `RoutingRule`s in priority order, then the
default agent. The router is installed as a BEFORE_BROADCAST SYNC hook that stamps the choice
on the event as `_routed_to`; `AgentChannel.wants` honours it. A supervisor is listed in
`_always_process` so it sees everything. Events from agent channels are never routed, so
agents never trigger one another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookContext, HookExecution, HookFunction, HookTrigger
from voicehub.core.room import Room
from voicehub.orchestration.handoff import HandoffHandler, setup_handoff
from voicehub.orchestration.state import HUMAN, ConversationState, get_conversation_state

if TYPE_CHECKING:
    from voicehub.agents.channel import AgentChannel
    from voicehub.orchestration.runtime import OrchestrationRuntime

log = logging.getLogger("voicehub.router")

ROUTER_HOOK_PRIORITY = -100
"""The router runs before user hooks, so they see the routing decision."""

ROUTABLE_KINDS = (EventKind.MESSAGE, EventKind.TRANSCRIPT)

CustomCondition = Callable[[Event, Room, ConversationState], bool]
"""The signature of `RoutingConditions.custom`: (event, room, state) -> whether the rule applies."""


class RoutingConditions(BaseModel):
    """When a rule applies. Every condition given must hold (they are ANDed); an empty
    condition does not constrain, so `RoutingConditions()` matches every event."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    phases: frozenset[str] = frozenset()
    channel_types: frozenset[ChannelType] = frozenset()
    intents: frozenset[str] = frozenset()
    source_channel_ids: frozenset[str] = frozenset()
    custom: CustomCondition | None = None

    def matches(self, event: Event, room: Room, state: ConversationState) -> bool:
        """Whether `event`, in `room` with `state`, satisfies every condition."""
        if self.phases and state.phase not in self.phases:
            return False
        if self.channel_types and event.source_type not in self.channel_types:
            return False
        if self.intents and event.metadata.get("intent") not in self.intents:
            return False
        if self.source_channel_ids and event.source not in self.source_channel_ids:
            return False
        return self.custom is None or bool(self.custom(event, room, state))


class RoutingRule(BaseModel):
    """Route to `agent_id` when `conditions` hold. Lower `priority` is tried first."""

    model_config = ConfigDict(frozen=True)

    agent_id: str = Field(min_length=1)
    conditions: RoutingConditions = Field(default_factory=RoutingConditions)
    priority: int = 0


def agent_is_attached(room: Room, agent_id: str) -> bool:
    """Whether an agent channel named `agent_id` is bound to `room`."""
    channel = room.channels.get(agent_id)
    return channel is not None and channel.channel_type is ChannelType.AGENT


class ConversationRouter:
    """Chooses the agent that answers each inbound message of a room.

    Only agents attached to the room are chosen (a rule whose agent is absent is skipped),
    so a hub-wide router leaves rooms without those agents alone. While a human has the
    conversation (`state.awaiting_human`), messages are routed to `HUMAN` and no agent answers
    except the supervisor.
    """

    def __init__(
        self,
        rules: Sequence[RoutingRule] = (),
        default_agent_id: str | None = None,
        supervisor_id: str | None = None,
    ) -> None:
        # sorted() is stable: rules of equal priority keep the order they were given in.
        self.rules = sorted(rules, key=lambda rule: rule.priority)
        self.default_agent_id = default_agent_id
        self.supervisor_id = supervisor_id

    @property
    def agent_ids(self) -> set[str]:
        """Every agent the router can choose (rule agents and the default)."""
        ids = {rule.agent_id for rule in self.rules}
        if self.default_agent_id is not None:
            ids.add(self.default_agent_id)
        return ids

    def select(self, event: Event, room: Room, state: ConversationState) -> str | None:
        """The agent that should answer `event`: affinity, then rules, then the default.

        Returns `HUMAN` while a person has the conversation, or None when no attached agent
        qualifies (then the event is not stamped and every agent may answer).
        """
        if state.awaiting_human:
            return HUMAN
        active = state.active_agent_id
        if active is not None and agent_is_attached(room, active):
            return active
        for rule in self.rules:
            if rule.conditions.matches(event, room, state):
                if agent_is_attached(room, rule.agent_id):
                    return rule.agent_id
                log.debug("rule for %s matched but it is not in room %s", rule.agent_id, room.id)
        default = self.default_agent_id
        if default is not None and agent_is_attached(room, default):
            return default
        return None

    def route(self, event: Event, room: Room) -> Event:
        """`event` stamped with the routing decision (unchanged if it is not routable)."""
        if event.from_agent or event.kind not in ROUTABLE_KINDS:
            return event
        if "_routed_to" in event.metadata:
            return event  # an explicit target set by the sender wins
        target = self.select(event, room, get_conversation_state(room))
        updates: dict[str, Any] = {}
        if target is not None:
            updates["_routed_to"] = target
        supervisor = self.supervisor_id
        if supervisor is not None and supervisor != target:
            always = list(event.metadata.get("_always_process", ()))
            updates["_always_process"] = (
                [*always, supervisor] if supervisor not in always else always
            )
        return event.with_metadata(**updates) if updates else event

    def as_hook(self) -> HookFunction:
        """The BEFORE_BROADCAST SYNC hook function applying `route` to each event."""

        async def conversation_router(event: Event, context: HookContext) -> Event | None:
            room = context.hub.rooms.get(context.room_id)
            if room is None:
                return None
            return self.route(event, room)

        return conversation_router

    def install(
        self,
        hub: OrchestrationRuntime,
        agents: Sequence[AgentChannel],
        *,
        room_id: str | None = None,
        agent_aliases: Mapping[str, str] | None = None,
        phase_map: Mapping[str, str] | None = None,
        allowed_transitions: Mapping[str, Collection[str]] | None = None,
        targets: Mapping[str, Sequence[str]] | None = None,
        allow_human: bool = False,
        hook_priority: int = ROUTER_HOOK_PRIORITY,
    ) -> HandoffHandler:
        """Register the routing hook (for `room_id`, or hub-wide) and give every agent in
        `agents` the `handoff_conversation` tool. Returns the handler.

        `targets` maps an agent id to the agents it may hand off to; by default each agent
        may reach every other agent in `agents` (and `"human"` with `allow_human`). Attaching
        the channels to rooms stays with the caller.
        """
        hub.hooks.add(
            HookTrigger.BEFORE_BROADCAST,
            self.as_hook(),
            execution=HookExecution.SYNC,
            priority=hook_priority,
            room_id=room_id,
            name="conversation_router",
        )
        handler = HandoffHandler(
            hub,
            self,
            agent_aliases=agent_aliases,
            phase_map=phase_map,
            allowed_transitions=allowed_transitions,
            allow_human=allow_human,
            agents={channel.channel_id: channel.agent for channel in agents},
        )
        ids = [channel.channel_id for channel in agents]
        for channel in agents:
            if targets is not None:
                reachable = list(targets.get(channel.channel_id, ()))
            else:
                reachable = [other for other in ids if other != channel.channel_id]
            if allow_human and HUMAN not in reachable:
                reachable.append(HUMAN)
            if reachable:
                setup_handoff(channel, handler, reachable)
        return handler
