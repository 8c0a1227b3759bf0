"""Who has a desk's conversation: the `[pipeline]` or `[swarm]` strategy, and `ask_user`.

`handoff_strategy(config, agents)` builds the strategy a desk file declares: a
`StagedPipeline` (the stages as written, branches and `can_return_to` included) or a
`Swarm`. Its handoff handler (one per hub) serves the desk's text rooms and its calls alike.

`text_ask_user_tool` is the `ask_user` tool of a desk's agents in text rooms: the question is
posted as the asking agent's message and the next user message is the answer. A call
replaces it with one that speaks the question (`voicehub.desks.voice_asker`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool, ToolContext
from voicehub.errors import ToolError
from voicehub.orchestration.ask_user import Question, TextAsker, run_interview
from voicehub.orchestration.pipeline import (
    ConversationPipeline,
    HandoffStrategy,
    Pipeline,
    PipelineStage,
)
from voicehub.orchestration.runtime import orchestration_runtime
from voicehub.orchestration.swarm import Swarm

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime
    from voicehub.desks.loading import DeskConfig

__all__ = ["StagedPipeline", "handoff_strategy", "text_ask_user_tool"]


class StagedPipeline(Pipeline):
    """A `Pipeline` whose graph is given stage by stage, as a desk file's `[pipeline]`
    declares it (an agent may serve several stages; `can_return_to` goes back), rather than
    as a linear chain of agents. `agents` are the stage agents, each once."""

    def __init__(
        self,
        agents: Sequence[Agent],
        stages: Sequence[PipelineStage],
        *,
        greeting: str | None = None,
    ) -> None:
        super().__init__(agents, greeting=greeting)
        # The linear chain the base class derived is replaced by the declared graph.
        self.pipeline = ConversationPipeline(stages)
        self.router = self.pipeline.to_router()


def handoff_strategy(config: DeskConfig, agents: Mapping[str, Agent]) -> HandoffStrategy | None:
    """The strategy of `config`'s `[pipeline]` or `[swarm]` (None without either), running
    `agents` (by id, as the desk built them, with the tools the desk adds)."""
    members = [agents[agent_id] for agent_id in config.conversation_agent_ids]
    if config.pipeline is not None:
        stages = [
            PipelineStage(
                phase=stage.phase,
                agent_id=stage.agent,
                next=stage.next,
                can_return_to=frozenset(stage.can_return_to),
            )
            for stage in config.pipeline.stages
        ]
        return StagedPipeline(members, stages, greeting=config.pipeline.handoff_instruction)
    if config.swarm is not None:
        return Swarm(members, config.swarm.entry, greeting=config.swarm.handoff_instruction)
    return None


def text_ask_user_tool(*, timeout: float, max_reasks: int) -> Tool:
    """`ask_user` for the text rooms of any hub: asks through one `TextAsker` per hub and
    agent (the question is that agent's message), waiting `timeout` seconds per answer."""
    askers: WeakKeyDictionary[Runtime, dict[str, TextAsker]] = WeakKeyDictionary()

    async def ask_user(questions: list[Question], context: ToolContext, preamble: str = "") -> str:
        """Ask the user one or more questions and wait for the answers (JSON). Use it when
        you need a clarification or a decision only the user can make. Types: freeform,
        yes-no, confirm, single-select, multi-select (give options with a label each)."""
        if not questions:
            raise ToolError("questions is empty: give at least one question")
        if context.hub is None or not context.room_id:
            raise ToolError("ask_user needs a room; it was called outside one")
        hub = orchestration_runtime(context.hub, "ask_user")
        by_agent = askers.setdefault(hub, {})
        agent_id = context.agent_id or "assistant"
        asker = by_agent.get(agent_id)
        if asker is None:
            asker = by_agent[agent_id] = TextAsker(hub, agent_id=agent_id, timeout=timeout)
        result = await run_interview(
            asker, context.room_id, questions, preamble, max_reasks=max_reasks
        )
        return json.dumps(result.model_dump(mode="json"))

    return Tool(ask_user)
