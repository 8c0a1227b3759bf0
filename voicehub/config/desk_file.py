"""The whole desk file, and the checks that span tables: agent references, tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import Field, PrivateAttr, model_validator

from voicehub.config.models import (
    AgentConfig,
    DeliveryConfig,
    KnowledgeConfig,
    LoopConfig,
    PipelineConfig,
    Slug,
    StrictModel,
    SupervisorConfig,
    SwarmConfig,
    VoiceConfig,
    field_error,
)
from voicehub.tools.registry import BUILTIN_TOOLS, needs_knowledge_message


class DeskConfig(StrictModel):
    """A whole desk file. Build the runtime with `voicehub.desk.build_desk`."""

    name: Slug
    title: str = ""
    description: str = ""
    greeting: str | None = None
    voice: VoiceConfig = Field(default_factory=VoiceConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    knowledge: KnowledgeConfig | None = None
    agents: tuple[AgentConfig, ...] = Field(min_length=1)
    supervisor: SupervisorConfig | None = None
    loop: LoopConfig | None = None
    pipeline: PipelineConfig | None = None
    swarm: SwarmConfig | None = None
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file this desk was loaded from (None when built in code)."""
        return self._source

    @property
    def front_agent_id(self) -> str:
        """The agent that talks to the caller."""
        if self.supervisor is not None:
            return self.supervisor.agent
        if self.loop is not None and self.loop.agent is not None:
            return self.loop.agent
        return self.agents[0].id

    def agent(self, agent_id: str) -> AgentConfig:
        """The `[[agents]]` table with id `agent_id` (StopIteration if there is none)."""
        return next(a for a in self.agents if a.id == agent_id)

    def orchestration_tools(self, agent_id: str) -> list[str]:
        """Names of the tools the desk's orchestration adds to `agent_id`."""
        names: list[str] = []
        if agent_id == self.front_agent_id and (self.supervisor or self.loop):
            names += ["delegate_workers"] if self.supervisor else []
            names += ["delegate_loop"] if self.loop else []
            names += ["check_tasks", "cancel_task"]
        if self.loop is not None and agent_id in self.loop.reviewers:
            names.append("submit_verdict")
        return names

    @model_validator(mode="after")
    def _references_resolve(self) -> DeskConfig:
        problem = next(_reference_problems(self), None)
        if problem is not None:
            raise field_error(*problem)
        return self


def _reference_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    """(path, message) for each cross-reference that does not resolve, first found first."""
    ids: list[str] = []
    for i, agent in enumerate(desk.agents):
        if agent.id in ids:
            yield f"agents[{i}].id", f"agent id {agent.id!r} is used twice"
        ids.append(agent.id)
    refs: list[tuple[str, str | None]] = []
    if desk.supervisor is not None:
        refs += [("supervisor.agent", desk.supervisor.agent)]
        refs += [(f"supervisor.workers[{j}]", w) for j, w in enumerate(desk.supervisor.workers)]
    if desk.loop is not None:
        refs += [("loop.agent", desk.loop.agent), ("loop.producer", desk.loop.producer)]
        refs += [(f"loop.reviewers[{j}]", r) for j, r in enumerate(desk.loop.reviewers)]
    if desk.pipeline is not None:
        refs += [
            (f"pipeline.stages[{j}].agent", s.agent) for j, s in enumerate(desk.pipeline.stages)
        ]
    if desk.swarm is not None:
        refs += [(f"swarm.agents[{j}]", a) for j, a in enumerate(desk.swarm.agents)]
    for path, ref in refs:
        if ref is not None and ref not in ids:
            yield path, f"unknown agent {ref!r}; agents in this desk: {', '.join(ids)}"
    front = desk.front_agent_id
    if desk.supervisor is not None:
        yield from _repeats("supervisor.workers", desk.supervisor.workers)
        if front in desk.supervisor.workers:
            yield "supervisor.workers", f"{front!r} is the front agent; it cannot be a worker"
    if desk.loop is not None:
        yield from _repeats("loop.reviewers", desk.loop.reviewers)
        if desk.loop.producer in desk.loop.reviewers:
            yield "loop.reviewers", f"{desk.loop.producer!r} cannot review its own drafts"
        if desk.supervisor is None and desk.loop.agent is None:
            yield "loop.agent", "name the front agent, the one that talks to the caller"
        elif desk.loop.agent not in (None, front):
            yield "loop.agent", f"must be the supervisor's agent {front!r}: one front agent"
    yield from _tool_problems(desk)


def _repeats(path: str, values: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    for j, value in enumerate(values):
        if value in values[:j]:
            yield f"{path}[{j}]", f"{value!r} is listed twice"


def _tool_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    for i, agent in enumerate(desk.agents):
        for j, name in enumerate(agent.tools):
            if BUILTIN_TOOLS[name].needs_knowledge and desk.knowledge is None:
                yield f"agents[{i}].tools[{j}]", needs_knowledge_message(name)
        if agent.scripted is None or desk.pipeline is not None or desk.swarm is not None:
            continue  # pipeline and swarm will add handoff tools of their own
        offered = [*agent.tools, *desk.orchestration_tools(agent.id)]
        for j, rule in enumerate(agent.scripted.rules):
            if rule.tool is not None and rule.tool not in offered:
                has = ", ".join(offered) or "no tools"
                yield (
                    f"agents[{i}].scripted.rules[{j}].tool",
                    f"tool {rule.tool!r} is not available to agent {agent.id!r} (it has {has})",
                )
