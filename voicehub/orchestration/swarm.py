"""Swarm: peers that pass the conversation to one another, with no fixed order.

The entry agent starts; any agent may hand off to any other. Routing is sticky: the agent
that has the conversation keeps it (router affinity) until it hands it off. Phases do not
constrain a swarm; a handoff keeps the current phase unless the model names `next_phase`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from voicehub.agents.agent import Agent
from voicehub.errors import ConfigError
from voicehub.orchestration.handoff import HandoffHandler
from voicehub.orchestration.pipeline import HandoffStrategy
from voicehub.orchestration.router import ConversationRouter
from voicehub.orchestration.state import ConversationPhase, ConversationState

if TYPE_CHECKING:
    from voicehub.orchestration.runtime import OrchestrationRuntime


class Swarm(HandoffStrategy):
    """`agents` hand off to each other freely; `entry` (an agent or its id, default the
    first agent) has the conversation first.

    `supervisor` is attached too and sees every message. `allow_human` adds the "human"
    target. With `greeting`, the new agent speaks right after an accepted handoff; without it,
    the next message reaches it.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        entry: Agent | str | None = None,
        *,
        supervisor: Agent | None = None,
        agent_aliases: Mapping[str, str] | None = None,
        allow_human: bool = False,
        greeting: str | None = None,
        memory_window: int = 50,
        phase: str = ConversationPhase.INTAKE,
    ) -> None:
        super().__init__(
            agents,
            supervisor=supervisor,
            agent_aliases=agent_aliases,
            allow_human=allow_human,
            greeting=greeting,
            memory_window=memory_window,
        )
        ids = [agent.id for agent in self.members]
        entry_id = entry.id if isinstance(entry, Agent) else entry
        if entry_id is None:
            entry_id = ids[0]
        if entry_id not in ids:
            raise ConfigError(f"Swarm entry {entry_id!r} is not one of its agents: {ids}")
        self.entry_id = entry_id
        self.phase = str(phase)
        self.router = ConversationRouter(
            default_agent_id=entry_id, supervisor_id=supervisor.id if supervisor else None
        )

    def make_handler(self, hub: OrchestrationRuntime) -> HandoffHandler:
        # No phase map and no transition graph: any agent may take over from any other.
        return HandoffHandler(
            hub,
            self.router,
            agent_aliases=self.agent_aliases,
            allow_human=self.allow_human,
            agent_ids=[agent.id for agent in self.members],
            agents={agent.id: agent for agent in self.members},
        )

    def targets_for(self, agent_id: str) -> list[str]:
        return [agent.id for agent in self.members if agent.id != agent_id]

    def initial_state(self) -> ConversationState:
        return ConversationState(phase=self.phase, active_agent_id=self.entry_id)
