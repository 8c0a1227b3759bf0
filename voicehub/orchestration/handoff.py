"""The handoff protocol: an agent passes the conversation to another agent (or a person).

The active agent calls the `handoff_conversation` tool. `HandoffHandler.handle` validates the
target and the phase transition; a rejection comes back to the model as an error tool result
saying why and listing the valid targets, so it can correct itself. An accepted handoff
updates and persists the `ConversationState`, posts a SYSTEM event, runs the ON_HANDOFF (and,
when the phase changes, ON_PHASE_TRANSITION) hooks and notifies `on_accepted` listeners.

How it takes effect: the handing-off agent finishes its turn (typically "I'm transferring you
to billing"); the router's affinity then sends the next inbound message to the new agent,
whose memory (`HandoffMemoryProvider`) starts with the summary it was handed. A live voice
session, which runs one agent at a time instead of routing, subscribes with
`handler.on_accepted(callback, room_id=...)` and switches its agent in the callback.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field, JsonValue

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage
from voicehub.agents.memory import MemoryProvider
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookTrigger
from voicehub.errors import ToolError
from voicehub.orchestration.state import (
    HUMAN,
    ConversationState,
    get_conversation_state,
    set_conversation_state,
)

if TYPE_CHECKING:
    from voicehub.core.room import Room
    from voicehub.core.runtime import Runtime
    from voicehub.orchestration.runtime import OrchestrationRuntime

log = logging.getLogger("voicehub.handoff")

HANDOFF_TOOL = "handoff_conversation"

ChannelEscalation = Literal["same", "voice", "email", "sms"]

HandoffListener = Callable[[str, ConversationState, str | None], Awaitable[None] | None]
"""Called as `listener(room_id, new_state, target_agent_id)` after an accepted handoff;
`target_agent_id` is None when a person took over."""


@dataclass(frozen=True)
class HandoffResult:
    """What `HandoffHandler.handle` decided. `message` is the text the model sees."""

    accepted: bool
    message: str
    target: str | None = None
    state: ConversationState | None = None
    valid_targets: tuple[str, ...] = ()


class RoutedAgents(Protocol):
    """What a handler needs of the router it works with (a `ConversationRouter`)."""

    @property
    def agent_ids(self) -> set[str]: ...

    @property
    def supervisor_id(self) -> str | None: ...


class HandoffHandler:
    """Validates and applies handoffs in the rooms of one hub.

    `agent_aliases` maps friendly names to agent ids ("billing" -> "agent-billing");
    `phase_map` gives each agent its default phase (used when the model names no
    `next_phase`); `allowed_transitions` (phase -> next phases, from a pipeline) rejects
    phase changes outside the graph; staying in the same phase is always allowed, and so is
    leaving a phase the graph does not list.
    `allow_human` enables the special target "human". `agent_ids` names agents that are
    valid targets even when not attached to the room (a voice session runs them itself).
    `agents` are the agents it hands between (their descriptions go into the tool).
    """

    def __init__(
        self,
        hub: OrchestrationRuntime,
        router: RoutedAgents | None = None,
        agent_aliases: Mapping[str, str] | None = None,
        phase_map: Mapping[str, str] | None = None,
        allowed_transitions: Mapping[str, Collection[str]] | None = None,
        *,
        allow_human: bool = False,
        agent_ids: Collection[str] = (),
        agents: Mapping[str, Agent] | None = None,
    ) -> None:
        self.hub = hub
        # The agents this handler hands between, for the tool's target descriptions; the
        # hub's registered agents otherwise (desks may reuse ids, so no global lookup).
        self.agents = dict(agents) if agents is not None else None
        self.agent_ids = frozenset(agent_ids)
        self.router = router
        self.agent_aliases = dict(agent_aliases or {})
        self.phase_map = dict(phase_map or {})
        self.allowed_transitions = (
            None
            if allowed_transitions is None
            else {phase: frozenset(nexts) for phase, nexts in allowed_transitions.items()}
        )
        self.allow_human = allow_human
        self._listeners: list[tuple[HandoffListener, str | None]] = []
        # One lock for every room: handoffs are rare, and it keeps read-validate-write of
        # the state atomic without a per-room table that would grow forever.
        self._lock = asyncio.Lock()

    # -- listeners -----------------------------------------------------------------------

    def on_accepted(
        self, listener: HandoffListener, *, room_id: str | None = None
    ) -> Callable[[], None]:
        """Call `listener(room_id, state, target_agent_id)` after each accepted handoff (in
        `room_id` only, if given). Returns a function that unsubscribes it."""
        entry = (listener, room_id)
        self._listeners.append(entry)

        def unsubscribe() -> None:
            if entry in self._listeners:
                self._listeners.remove(entry)

        return unsubscribe

    # -- validation ----------------------------------------------------------------------

    def resolve(self, target: str) -> str:
        """The agent id a target name stands for (aliases applied; "human" stays "human")."""
        name = target.strip()
        return self.agent_aliases.get(name, name)

    def known_targets(self, room: Room | None) -> list[str]:
        """Agents a handoff may name in `room`: agents attached to it, `agent_ids`, the
        router's agents, the phase map's and aliases' agents, and "human" when allowed."""
        known = {*self.agent_ids, *self.phase_map, *self.agent_aliases.values()}
        if self.router is not None:
            known |= self.router.agent_ids
        if room is not None:
            known |= {
                cid for cid, ch in room.channels.items() if ch.channel_type is ChannelType.AGENT
            }
        known.discard(HUMAN)
        if self.router is not None and self.router.supervisor_id is not None:
            known.discard(self.router.supervisor_id)  # the supervisor observes; it never takes over
        return sorted(known) + ([HUMAN] if self.allow_human else [])

    def _check(
        self,
        room: Room,
        state: ConversationState,
        from_agent: str,
        target: str,
        next_phase: str | None,
        reachable: Sequence[str] | None,
    ) -> tuple[str | None, list[str]]:
        """(why the handoff is rejected, or None; the targets the model may use)."""
        valid = self.known_targets(room)
        if reachable is not None:
            allowed = {self.resolve(t) for t in reachable}
            valid = [t for t in valid if t in allowed]
        valid = [t for t in valid if t != from_agent]
        if target == from_agent:
            return f"{from_agent!r} already has the conversation; pick another target", valid
        if target == HUMAN and not self.allow_human:
            return "handing off to a human is not enabled on this desk", valid
        if target not in valid:
            return f"unknown or unreachable target {target!r}", valid
        to_phase = self._next_phase(state, target, next_phase)
        graph = self.allowed_transitions
        # The graph governs moves out of the phases it lists; a conversation still in a
        # phase outside it (a fresh room's "intake", say) may enter it anywhere.
        if graph is not None and to_phase != state.phase and state.phase in graph:
            nexts = sorted(graph.get(state.phase, ()))
            if to_phase not in nexts:
                allowed_text = ", ".join(nexts) or "none"
                return (
                    f"phase {state.phase!r} cannot move to {to_phase!r} "
                    f"(allowed next phases: {allowed_text})"
                ), valid
        return None, valid

    def _next_phase(self, state: ConversationState, target: str, next_phase: str | None) -> str:
        if next_phase is not None and next_phase.strip():
            return next_phase.strip()
        return self.phase_map.get(target, state.phase)

    # -- handling ------------------------------------------------------------------------

    async def handle(
        self,
        room_id: str,
        from_agent: str,
        target: str,
        reason: str = "",
        summary: str = "",
        next_phase: str | None = None,
        channel_escalation: ChannelEscalation = "same",
        *,
        reachable: Sequence[str] | None = None,
    ) -> HandoffResult:
        """Validate and apply one handoff in `room_id`. A bad request does not raise: the
        rejection's `message` says why and lists the valid targets.

        `reachable` further limits the targets (the calling agent's tool targets).
        """
        room = self.hub.room(room_id)
        resolved = self.resolve(target)
        async with self._lock:
            state = get_conversation_state(room)
            problem, valid = self._check(room, state, from_agent, resolved, next_phase, reachable)
            if problem is not None:
                new_state = None
            else:
                new_state = state.transition(
                    self._next_phase(state, resolved, next_phase),
                    resolved,
                    reason,
                    summary=summary or None,
                    from_agent=from_agent,
                    metadata={"channel_escalation": channel_escalation},
                )
                await set_conversation_state(room, new_state)
        if new_state is None:
            return await self._reject(room_id, from_agent, resolved, problem or "", valid)
        return await self._accept(room, state, new_state)

    async def _reject(
        self, room_id: str, from_agent: str, target: str, problem: str, valid: list[str]
    ) -> HandoffResult:
        message = f"handoff rejected: {problem}. Valid targets: {', '.join(valid) or 'none'}."
        details = {"from_agent": from_agent, "target": target, "problem": problem}
        event = _system_event(room_id, message, handoff=details)
        await self.hub.run_hooks(HookTrigger.ON_HANDOFF_REJECTED, event)
        log.info("room %s: %s", room_id, message)
        return HandoffResult(False, message, target, None, tuple(valid))

    async def _accept(
        self, room: Room, before: ConversationState, after: ConversationState
    ) -> HandoffResult:
        record = after.phase_history[-1]
        details = {
            **record.model_dump(mode="json", include={"from_agent", "to_agent", "reason"}),
            "from_phase": before.phase,
            "to_phase": after.phase,
            "summary": after.handoff_summary or "",
            "channel_escalation": record.metadata.get("channel_escalation", "same"),
            "handoff_count": after.handoff_count,
        }
        text = f"Conversation handed off from {record.from_agent} to {record.to_agent}"
        event = _system_event(room.id, f"{text}: {record.reason}" if record.reason else text)
        event = await room.post(event.with_metadata(handoff=details)) or event
        await self.hub.run_hooks(HookTrigger.ON_HANDOFF, event)
        if before.phase != after.phase:
            await self.hub.run_hooks(HookTrigger.ON_PHASE_TRANSITION, event)
        await self._notify(room.id, after)
        message = {
            "status": "accepted",
            "target": record.to_agent,
            "phase": after.phase,
            "message": f"{record.to_agent} now has the conversation; tell the user they are "
            "being transferred.",
        }
        return HandoffResult(True, json.dumps(message), record.to_agent, after)

    async def _notify(self, room_id: str, state: ConversationState) -> None:
        target = state.active_agent_id
        for listener, scope in list(self._listeners):
            if scope is not None and scope != room_id:
                continue
            try:
                outcome = listener(room_id, state, target)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # a broken listener must not undo an accepted handoff
                log.exception("handoff listener failed in room %s", room_id)

    def describe_target(self, target: str) -> str:
        """One line about a target for the tool description."""
        if target == HUMAN:
            return f"{HUMAN}: a person from the team takes over"
        known = self.agents if self.agents is not None else self.hub.agents_of(None)
        agent = known.get(target)
        if agent is None:
            return target
        about = agent.when_to_use or agent.description or agent.role
        return f"{target}: {about}" if about else target


def _system_event(room_id: str, text: str, **metadata: object) -> Event:
    return Event(
        kind=EventKind.SYSTEM,
        text=text,
        source="orchestration",
        source_type=ChannelType.SYSTEM,
        role="system",
        room_id=room_id,
        metadata=dict(metadata),
    )


# The argument descriptions the model reads (module level: they never change).
_REASON: Any = Field(description="Why the handoff is needed")
_SUMMARY: Any = Field(description="What the next agent needs to know: facts, ids, what was tried")
_NEXT_PHASE: Any = Field(default=None, description="Phase to move to (default: the target's)")
_ESCALATION: Any = Field(default="same", description="Continue on another channel (default: same)")


def handoff_tool(handler: HandoffHandler, targets: Sequence[str] | None = None) -> Tool:
    """The `handoff_conversation` tool bound to `handler`. With `targets`, the schema
    advertises them as an enum and anything else is rejected with the valid list."""
    reachable = list(targets) if targets is not None else None
    options: list[JsonValue] = [*reachable] if reachable else []
    target_field: Any = Field(
        description="Agent id (or alias) to hand the conversation to",
        json_schema_extra={"enum": options} if options else None,
    )

    async def handoff_conversation(
        context: ToolContext,
        target: str = target_field,
        reason: str = _REASON,
        summary: str = _SUMMARY,
        next_phase: str | None = _NEXT_PHASE,
        channel_escalation: ChannelEscalation = _ESCALATION,
    ) -> str:
        if context.hub is None or not context.room_id:
            raise ToolError("handoff_conversation needs a room; it was called outside one")
        result = await handler.handle(
            context.room_id,
            context.agent_id,
            target,
            reason,
            summary,
            next_phase,
            channel_escalation,
            reachable=reachable,
        )
        if not result.accepted:
            raise ToolError(result.message)
        return result.message

    description = "Transfer the conversation to another agent when it is better placed."
    if reachable:
        description += " Targets: " + "; ".join(handler.describe_target(t) for t in reachable)
    return Tool(handoff_conversation, name=HANDOFF_TOOL, description=description)


def setup_handoff(
    channel: AgentChannel, handler: HandoffHandler, targets: Sequence[str] | None = None
) -> Tool:
    """Give `channel` the `handoff_conversation` tool (replacing an earlier one)."""
    made = handoff_tool(handler, targets)
    channel.extra_tools = [t for t in channel.extra_tools if t.name != HANDOFF_TOOL] + [made]
    return made


class HandoffMemoryProvider:
    """Wraps a memory provider: after a handoff, the receiving agent's messages start with
    "[Context from previous agent (<id>)]: <summary>" for as long as it has the conversation.

    The note is a user-role message because the runner treats a leading system message as
    the agent's own instructions and would drop them.
    """

    def __init__(self, inner: MemoryProvider) -> None:
        self.inner = inner

    async def messages(self, hub: Runtime, room_id: str, agent_id: str) -> list[ChatMessage]:
        messages = await self.inner.messages(hub, room_id, agent_id)
        room = hub.rooms.get(room_id)
        if room is None:
            return messages
        state = get_conversation_state(room)
        if (
            state.active_agent_id == agent_id
            and state.handoff_summary
            and state.previous_agent_id not in (None, agent_id)
        ):
            note = f"[Context from previous agent ({state.previous_agent_id})]: "
            messages.insert(0, ChatMessage(role="user", content=note + state.handoff_summary))
        return messages
