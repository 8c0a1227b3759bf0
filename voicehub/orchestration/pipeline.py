"""Pipelines: a conversation that moves through phases, one agent per phase.

`ConversationPipeline` is the graph (stages, each with a phase, an agent and where it may go
next), validated when built; it derives the router, the phase map and the allowed
transitions. `Pipeline` is the ready-made strategy: a list of agents chained linearly, each
able to hand off only to the next one.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.memory import SlidingWindowMemory
from voicehub.core.events import Event
from voicehub.core.hooks import HookExecution, HookTrigger
from voicehub.errors import ConfigError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.handoff import HandoffHandler, HandoffMemoryProvider, setup_handoff
from voicehub.orchestration.router import (
    ROUTER_HOOK_PRIORITY,
    ConversationRouter,
    RoutingConditions,
    RoutingRule,
)
from voicehub.orchestration.state import (
    HUMAN,
    STATE_KEY,
    ConversationState,
    get_conversation_state,
    set_conversation_state,
)

if TYPE_CHECKING:
    from voicehub.core.room import Room
    from voicehub.orchestration.runtime import OrchestrationRuntime


class PipelineStage(BaseModel):
    """One stage: in `phase`, `agent_id` has the conversation; it may move on to `next` or
    back to any phase in `can_return_to`."""

    model_config = ConfigDict(frozen=True)

    phase: str = Field(min_length=1)
    agent_id: str = Field(min_length=1)
    next: str | None = None
    can_return_to: frozenset[str] = frozenset()


class ConversationPipeline:
    """A validated graph of stages. Raises ConfigError at construction for an empty
    pipeline, a repeated phase, or a `next`/`can_return_to` naming an unknown phase
    (a stage may name its own phase, for loops).

    An agent may serve several stages; its first stage gives its default phase.
    """

    def __init__(self, stages: Sequence[PipelineStage], supervisor_id: str | None = None) -> None:
        self.stages = tuple(stages)
        self.supervisor_id = supervisor_id
        self._validate()

    def _validate(self) -> None:
        if not self.stages:
            raise ConfigError("a pipeline needs at least one stage")
        phases: dict[str, int] = {}
        for index, stage in enumerate(self.stages):
            if stage.phase in phases:
                raise ConfigError(
                    f"pipeline stages {phases[stage.phase]} and {index} both use phase "
                    f"{stage.phase!r}: each phase belongs to one stage"
                )
            phases[stage.phase] = index
        known = ", ".join(phases)
        for index, stage in enumerate(self.stages):
            where = f"pipeline stage {index} ({stage.phase!r}, agent {stage.agent_id!r})"
            if stage.next is not None and stage.next not in phases:
                raise ConfigError(f"{where}: next={stage.next!r} is not a phase; phases: {known}")
            for phase in sorted(stage.can_return_to):
                if phase not in phases:
                    raise ConfigError(
                        f"{where}: can_return_to names {phase!r}, which is not a phase; "
                        f"phases: {known}"
                    )
            if stage.agent_id == self.supervisor_id:
                raise ConfigError(
                    f"{where}: the supervisor {stage.agent_id!r} observes every stage and "
                    "cannot also run one"
                )

    @property
    def phases(self) -> list[str]:
        """The stage phases, in order."""
        return [stage.phase for stage in self.stages]

    def stage(self, phase: str) -> PipelineStage | None:
        """The stage of `phase`, if the pipeline has one."""
        return next((s for s in self.stages if s.phase == phase), None)

    def get_phase_map(self) -> dict[str, str]:
        """Agent id -> its default phase (the first stage it serves)."""
        mapping: dict[str, str] = {}
        for stage in self.stages:
            mapping.setdefault(stage.agent_id, stage.phase)
        return mapping

    def get_allowed_transitions(self) -> dict[str, set[str]]:
        """Phase -> the phases it may move to (`next` plus `can_return_to`)."""
        return {
            stage.phase: ({stage.next} if stage.next else set()) | set(stage.can_return_to)
            for stage in self.stages
        }

    def targets_for(self, agent_id: str) -> list[str]:
        """The agents `agent_id` may hand off to: those of the phases its stages reach."""
        allowed = self.get_allowed_transitions()
        reached: list[str] = []
        for stage in self.stages:
            if stage.agent_id != agent_id:
                continue
            for target in self.stages:  # stage order keeps the list stable
                if (
                    target.phase in allowed[stage.phase]
                    and target.agent_id != agent_id
                    and target.agent_id not in reached
                ):
                    reached.append(target.agent_id)
        return reached

    def to_router(self) -> ConversationRouter:
        """A router with one rule per stage (its phase -> its agent), in stage order, and
        the first stage's agent as the default."""
        rules = [
            RoutingRule(
                agent_id=stage.agent_id,
                conditions=RoutingConditions(phases=frozenset({stage.phase})),
                priority=index,
            )
            for index, stage in enumerate(self.stages)
        ]
        return ConversationRouter(
            rules, default_agent_id=self.stages[0].agent_id, supervisor_id=self.supervisor_id
        )

    def initial_state(self) -> ConversationState:
        """The first stage's phase, handled by its agent."""
        first = self.stages[0]
        return ConversationState(phase=first.phase, active_agent_id=first.agent_id)

    def install(
        self,
        hub: OrchestrationRuntime,
        agents: Sequence[AgentChannel],
        *,
        room_id: str | None = None,
        agent_aliases: Mapping[str, str] | None = None,
        hook_priority: int = ROUTER_HOOK_PRIORITY,
        allow_human: bool = False,
    ) -> tuple[ConversationRouter, HandoffHandler]:
        """Register the router hook (for `room_id`, or hub-wide) and give each stage agent a
        handoff tool limited to the agents it can reach. Returns (router, handler).

        The room's initial state is `initial_state()`: set it with `set_conversation_state`
        (the `Pipeline` strategy does). Until then the first agent answers, and its handoff may
        enter the graph at any phase.
        """
        router = self.to_router()
        handler = router.install(
            hub,
            agents,
            room_id=room_id,
            agent_aliases=agent_aliases,
            phase_map=self.get_phase_map(),
            allowed_transitions=self.get_allowed_transitions(),
            targets={
                channel.channel_id: self.targets_for(channel.channel_id) for channel in agents
            },
            allow_human=allow_human,
            hook_priority=hook_priority,
        )
        return router, handler


class HandoffStrategy(Orchestration):
    """The part Pipeline and Swarm share: agents attached as `AgentChannel`s with
    `HandoffMemoryProvider`, a room-scoped router hook, one `HandoffHandler` per hub, each
    agent's handoff tool limited to `targets_for(agent)`, and the initial state (kept when a
    stored room reopens, so a reconnecting call resumes with the same agent)."""

    router: ConversationRouter

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        supervisor: Agent | None,
        agent_aliases: Mapping[str, str] | None,
        allow_human: bool,
        greeting: str | None,
        memory_window: int,
    ) -> None:
        name = type(self).__name__
        if not agents:
            raise ConfigError(f"{name} needs at least one agent")
        ids = [agent.id for agent in agents] + ([supervisor.id] if supervisor else [])
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ConfigError(f"{name}: agent ids must be unique; repeated: {repeated}")
        if memory_window < 1:
            raise ConfigError(f"{name}: memory_window must be at least 1, got {memory_window}")
        self.members = list(agents)
        self.supervisor = supervisor
        self.agent_aliases = dict(agent_aliases or {})
        self.allow_human = allow_human
        self.greeting = greeting
        self.memory_window = memory_window
        self._handlers: dict[int, HandoffHandler] = {}

    def agents(self) -> list[Agent]:
        return [*self.members, *([self.supervisor] if self.supervisor else [])]

    @abstractmethod
    def make_handler(self, hub: OrchestrationRuntime) -> HandoffHandler:
        """A new handler for `hub` (called once per hub)."""

    @abstractmethod
    def targets_for(self, agent_id: str) -> list[str]:
        """The agents `agent_id` may hand off to."""

    @abstractmethod
    def initial_state(self) -> ConversationState:
        """The state a new room starts in."""

    def handler_for(self, hub: OrchestrationRuntime) -> HandoffHandler:
        """The handoff handler serving this strategy's rooms in `hub` (subscribe to it with
        `on_accepted`)."""
        handler = self._handlers.get(id(hub))
        # The handler holds the hub, so its id cannot be reused while the entry exists.
        if handler is None or handler.hub is not hub:
            handler = self._handlers[id(hub)] = self.make_handler(hub)
        return handler

    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        room = hub.room(room_id)
        handler = self.handler_for(hub)
        hub.hooks.add(
            HookTrigger.BEFORE_BROADCAST,
            self.router.as_hook(),
            execution=HookExecution.SYNC,
            priority=ROUTER_HOOK_PRIORITY,
            room_id=room_id,
            name="conversation_router",
        )
        for agent in self.members:
            channel = self._channel(agent, greets=self.greeting is not None)
            targets = self.targets_for(agent.id) + ([HUMAN] if self.allow_human else [])
            if targets:
                setup_handoff(channel, handler, targets)
            await room.attach(channel)
        if self.supervisor is not None:
            await room.attach(self._channel(self.supervisor, greets=False))
        if STATE_KEY not in room.metadata:
            await set_conversation_state(room, self.initial_state())

    def _channel(self, agent: Agent, *, greets: bool) -> AgentChannel:
        memory = HandoffMemoryProvider(SlidingWindowMemory(self.memory_window))
        return AgentChannel(agent, memory=memory, responder=self._respond if greets else None)

    async def _respond(self, channel: AgentChannel, event: Event, room: Room) -> None:
        """Answer, then let the agent that was just handed the conversation greet."""
        before = get_conversation_state(room).handoff_count
        await channel.reply(room)
        state = get_conversation_state(room)
        taker = room.channels.get(state.active_agent_id or "")
        if (
            self.greeting is not None
            and state.handoff_count != before
            and isinstance(taker, AgentChannel)
            and taker is not channel
        ):
            # After the old agent's goodbye, so the room reads in order.
            await taker.reply(room, instruction=self.greeting)


def handoff_handler_of(hub: OrchestrationRuntime, room_id: str) -> HandoffHandler | None:
    """The handoff handler of the Pipeline or Swarm running `room_id`, if there is one.

    A voice session uses it to follow handoffs: `handler.on_accepted(switch, room_id=...)`.
    """
    orchestration = hub.orchestration_of(room_id)
    if isinstance(orchestration, HandoffStrategy):
        return orchestration.handler_for(hub)
    return None


class Pipeline(HandoffStrategy):
    """Agents chained linearly: the first has the conversation, each may hand off to the
    next (and to "human" with `allow_human`).

    `phases` names the stages (default: the agent ids). `supervisor` is attached too and
    sees every message. With `greeting`, the new agent speaks right after an accepted handoff
    (run with `greeting` as its instruction); without it, the next message reaches it.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        phases: Sequence[str] | None = None,
        supervisor: Agent | None = None,
        agent_aliases: Mapping[str, str] | None = None,
        allow_human: bool = False,
        greeting: str | None = None,
        memory_window: int = 50,
    ) -> None:
        super().__init__(
            agents,
            supervisor=supervisor,
            agent_aliases=agent_aliases,
            allow_human=allow_human,
            greeting=greeting,
            memory_window=memory_window,
        )
        names = list(phases) if phases is not None else [agent.id for agent in agents]
        if len(names) != len(self.members):
            raise ConfigError(
                f"Pipeline got {len(names)} phases for {len(self.members)} agents: "
                "give one phase per agent, in order"
            )
        stages = [
            PipelineStage(
                phase=phase,
                agent_id=agent.id,
                next=names[index + 1] if index + 1 < len(names) else None,
            )
            for index, (phase, agent) in enumerate(zip(names, self.members, strict=True))
        ]
        self.pipeline = ConversationPipeline(
            stages, supervisor_id=supervisor.id if supervisor else None
        )
        self.router = self.pipeline.to_router()

    def make_handler(self, hub: OrchestrationRuntime) -> HandoffHandler:
        return HandoffHandler(
            hub,
            self.router,
            agent_aliases=self.agent_aliases,
            phase_map=self.pipeline.get_phase_map(),
            allowed_transitions=self.pipeline.get_allowed_transitions(),
            allow_human=self.allow_human,
            agent_ids=[agent.id for agent in self.members],
            agents={agent.id: agent for agent in self.members},
        )

    def targets_for(self, agent_id: str) -> list[str]:
        return self.pipeline.targets_for(agent_id)

    def initial_state(self) -> ConversationState:
        return self.pipeline.initial_state()
