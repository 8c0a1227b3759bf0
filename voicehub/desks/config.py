"""The whole desk file, and the checks that span tables: agent references, tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import Field, PrivateAttr, model_validator

from voicehub.desks.coordination_checks import coordination_problems
from voicehub.desks.coordination_sections import BlackboardConfig, ManagerConfig
from voicehub.desks.mcp_section import McpServerConfig
from voicehub.desks.phone import PhoneConfig
from voicehub.desks.privacy import PrivacyConfig
from voicehub.desks.record import RecordConfig
from voicehub.desks.sections import (
    AgentConfig,
    AskUserConfig,
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
from voicehub.desks.transfer import TransferConfig
from voicehub.mcp.names import qualified_tool
from voicehub.orchestration.board_state import BOARD_TOOLS
from voicehub.orchestration.manager_tools import PRE_RUN_TOOLS
from voicehub.orchestration.planner import ANALYSIS_TOOL, THOUGHT_TOOL
from voicehub.tools.registry import (
    BUILTIN_TOOLS,
    NEEDS_TRANSFER,
    needs_knowledge_message,
    with_companions,
)

REPORT_TOOL = "start_report"


class DeskConfig(StrictModel):
    """A whole desk file. Build the runtime with `voicehub.desks.desk.build_desk`."""

    name: Slug
    """The desk's name: lowercase letters, digits, `-` and `_`; unique in the folder. Calls reach it
    at `/desks/NAME/call`."""
    title: str = ""
    """A human title, shown in the console and `voicehub channels`."""
    description: str = ""
    """One sentence on what the desk does (the console shows it on hover)."""
    greeting: str | None = None
    """Spoken when a new conversation starts; none when unset (a caller who calls back is not
    greeted again)."""
    voice: VoiceConfig = Field(default_factory=VoiceConfig)
    """The voice stack of the desk's calls: `[voice]`."""
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)
    """When and how background results are spoken into the call: `[delivery]`."""
    knowledge: KnowledgeConfig | None = None
    """The desk's knowledge base (for the `search_knowledge` tool): `[knowledge]`."""
    agents: tuple[AgentConfig, ...] = Field(min_length=1)
    """The desk's agents, one `[[agents]]` table each; at least one."""
    supervisor: SupervisorConfig | None = None
    """The front agent delegates to workers in the background (`delegate_workers`):
    `[supervisor]`."""
    loop: LoopConfig | None = None
    """A producer revised by reviewers until they approve (`delegate_loop`): `[loop]`."""
    pipeline: PipelineConfig | None = None
    """Phases in order, each run by one agent that hands the caller on: `[pipeline]`."""
    swarm: SwarmConfig | None = None
    """Peers handing the caller to each other: `[swarm]` (not with `[pipeline]`)."""
    ask_user: AskUserConfig | None = None
    """Agents that may ask the caller questions (`ask_user`): `[ask_user]`."""
    phone: PhoneConfig = Field(default_factory=PhoneConfig)
    """How phone calls (Twilio) reach the desk: `[phone]`."""
    transfer: TransferConfig | None = None
    """Where `transfer_call` may put a caller through (people, desks): `[transfer]`."""
    manager: ManagerConfig | None = None
    """A manager agent routing work to agents and workflows by name (`delegate`): `[manager]`."""
    blackboard: BlackboardConfig | None = None
    """A coordinator running a report session over a shared board (`start_report`):
    `[blackboard]`."""
    record: RecordConfig = Field(default_factory=RecordConfig)
    """Recordings and transcripts of the desk's calls (off unless asked): `[record]`."""
    mcp: tuple[McpServerConfig, ...] = ()
    """MCP servers whose tools the agents may list in `tools` as `"NAME.TOOL"`: one `[[mcp]]`
    table each."""
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    """How long the desk's conversations are kept, what logs and traces scrub: `[privacy]`."""
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file this desk was loaded from (None when built in code)."""
        return self._source

    @property
    def front_agent_id(self) -> str:
        """The agent that delegates (`[supervisor]`/`[loop]`), else the entry agent."""
        if self.supervisor is not None:
            return self.supervisor.agent
        if self.loop is not None and self.loop.agent is not None:
            return self.loop.agent
        return self.entry_agent_id

    @property
    def entry_agent_id(self) -> str:
        """The agent a new conversation starts with: the first pipeline stage's, the swarm's
        entry, else the front agent (the first agent when nothing else says)."""
        if self.pipeline is not None:
            return self.pipeline.stages[0].agent
        if self.swarm is not None:
            return self.swarm.entry
        if self.supervisor is not None:
            return self.supervisor.agent
        if self.loop is not None and self.loop.agent is not None:
            return self.loop.agent
        return self.agents[0].id

    @property
    def conversation_agent_ids(self) -> list[str]:
        """The agents that may have the conversation (pipeline stages or swarm members in
        order; else just the front agent)."""
        if self.pipeline is not None:
            return list(dict.fromkeys(stage.agent for stage in self.pipeline.stages))
        if self.swarm is not None:
            return list(self.swarm.agents)
        return [self.front_agent_id]

    def handoff_targets(self, agent_id: str) -> list[str]:
        """The agents `agent_id` may hand the conversation to: in a swarm every other member;
        in a pipeline the agents of the phases its stages lead to (`next`, `can_return_to`)."""
        if self.swarm is not None:
            members = self.swarm.agents
            return [other for other in members if other != agent_id] if agent_id in members else []
        if self.pipeline is None:
            return []
        stages = self.pipeline.stages
        reached: set[str] = set()
        for stage in stages:
            if stage.agent == agent_id:
                reached |= {stage.next} if stage.next else set()
                reached |= set(stage.can_return_to)
        targets = [s.agent for s in stages if s.phase in reached and s.agent != agent_id]
        return list(dict.fromkeys(targets))  # stage order, each once

    @property
    def manager_agent_id(self) -> str | None:
        """The agent with `delegate` (`[manager]`), None without the section."""
        if self.manager is None:
            return None
        return self.manager.agent or self.front_agent_id

    @property
    def blackboard_agent_id(self) -> str | None:
        """The agent with `start_report` (`[blackboard]`), None without the section."""
        if self.blackboard is None:
            return None
        return self.blackboard.agent or self.front_agent_id

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
        if self.handoff_targets(agent_id):
            names.append("handoff_conversation")
        if self.ask_user is not None and agent_id in self.ask_user.agents:
            names.append("ask_user")
        background = ["check_tasks", "cancel_task"]
        if agent_id == self.manager_agent_id and self.manager is not None:
            names += [*PRE_RUN_TOOLS, "delegate"]
            names += background if self.manager.mode == "background" else []
        if agent_id == self.blackboard_agent_id:
            names += [REPORT_TOOL, *background]
        if self.blackboard is not None and agent_id == self.blackboard.orchestrator:
            names += BOARD_TOOLS
        if any(a.id == agent_id and a.kind == "plan_and_execute" for a in self.agents):
            names += [THOUGHT_TOOL, ANALYSIS_TOOL]
        return list(dict.fromkeys(names))

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
    if desk.ask_user is not None:
        refs += [(f"ask_user.agents[{j}]", a) for j, a in enumerate(desk.ask_user.agents)]
    if desk.manager is not None:
        refs += [("manager.agent", desk.manager.agent)]
        refs += [(f"manager.agents[{j}]", a) for j, a in enumerate(desk.manager.agents or ())]
    if desk.blackboard is not None:
        board = desk.blackboard
        refs += [("blackboard.agent", board.agent), ("blackboard.orchestrator", board.orchestrator)]
        refs += [(f"blackboard.{role}", a) for role, a in board.specialists.items()]
    for path, ref in refs:
        if ref is not None and ref not in ids:
            yield path, f"unknown agent {ref!r}; agents in this desk: {', '.join(ids)}"
    if desk.delivery.fallback == "sms" and desk.phone.conversation != "caller":
        yield (
            "delivery.fallback",
            'fallback "sms" texts the caller\'s number, which a desk with [phone] '
            'conversation = "call" does not keep: use "webhook", or conversation = "caller"',
        )
    if desk.pipeline is not None and desk.swarm is not None:
        yield "swarm", "a desk runs [pipeline] or [swarm], not both: keep one of them"
    if desk.swarm is not None:
        yield from _repeats("swarm.agents", desk.swarm.agents)
    if desk.ask_user is not None:
        yield from _repeats("ask_user.agents", desk.ask_user.agents)
        talking = desk.conversation_agent_ids
        for j, asker in enumerate(desk.ask_user.agents):
            if asker in ids and asker not in talking:
                yield (
                    f"ask_user.agents[{j}]",
                    f"{asker!r} never talks with the caller, so it cannot ask them anything "
                    f"(agents on the call: {', '.join(talking)})",
                )
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
    if any(ref is not None and ref not in ids for _, ref in refs):
        return  # the checks below assume every reference resolves
    yield from coordination_problems(desk)
    yield from _tool_problems(desk)


def _repeats(path: str, values: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    for j, value in enumerate(values):
        if value in values[:j]:
            yield f"{path}[{j}]", f"{value!r} is listed twice"


def model_tool_names(names: tuple[str, ...]) -> list[str]:
    """The names the model is offered for an agent's `tools` (builtins with their companions;
    an MCP tool `"server.tool"` under its own name)."""
    offered = with_companions([name for name in names if qualified_tool(name) is None])
    for name in names:
        qualified = qualified_tool(name)
        if qualified is not None:
            offered.append(qualified.tool)
    return offered


def _mcp_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    servers = [server.name for server in desk.mcp]
    for j, name in enumerate(servers):
        if name in servers[:j]:
            yield f"mcp[{j}].name", f"MCP server name {name!r} is used twice"
    for i, agent in enumerate(desk.agents):
        seen: dict[str, str] = {}
        own = [name for name in agent.tools if qualified_tool(name) is None]
        builtin = [*with_companions(own), *desk.orchestration_tools(agent.id)]
        for j, name in enumerate(agent.tools):
            qualified = qualified_tool(name)
            if qualified is None:
                continue
            path = f"agents[{i}].tools[{j}]"
            if qualified.server not in servers:
                known = ", ".join(servers) or "none: add an [[mcp]] table"
                yield path, f"no MCP server {qualified.server!r} in this desk (servers: {known})"
            elif qualified.tool in builtin:
                yield path, f"{name!r} has the name of the agent's tool {qualified.tool!r}"
            elif qualified.tool in seen:
                other = seen[qualified.tool]
                yield path, f"{name!r} and {other!r} are both named {qualified.tool!r}"
            seen[qualified.tool] = name


def _tool_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    yield from _mcp_problems(desk)
    for i, agent in enumerate(desk.agents):
        for j, name in enumerate(agent.tools):
            if qualified_tool(name) is not None:
                continue
            if BUILTIN_TOOLS[name].needs_knowledge and desk.knowledge is None:
                yield f"agents[{i}].tools[{j}]", needs_knowledge_message(name)
            if BUILTIN_TOOLS[name].needs_transfer and desk.transfer is None:
                yield f"agents[{i}].tools[{j}]", NEEDS_TRANSFER
        if agent.scripted is None:
            continue
        offered = [*model_tool_names(agent.tools), *desk.orchestration_tools(agent.id)]
        for j, rule in enumerate(agent.scripted.rules):
            if rule.tool is not None and rule.tool not in offered:
                has = ", ".join(offered) or "no tools"
                yield (
                    f"agents[{i}].scripted.rules[{j}].tool",
                    f"tool {rule.tool!r} is not available to agent {agent.id!r} (it has {has})",
                )
