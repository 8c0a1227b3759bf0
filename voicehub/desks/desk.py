"""Desks: a validated desk file composed into something that runs.

`build_desk(config)` builds the agents (their LLMs and builtin tools), the `Supervisor` and/or
`Loop` in background (voice) mode, the `[pipeline]` or `[swarm]` strategy, and the delivery
strategy. `Desk.orchestration()` is what a text room runs: the front agent with the tools
those orchestrations give it, or the pipeline/swarm agents handing off to each other.
`Desk.call_orchestration()` is the same for a call, where the voice session is the agent
(`voicehub.desks.pipeline_call.start_pipeline_call`). `Desk.make_hub()` gives a hub whose rooms all
run the desk.

    desks = load_desks("channels")
    hub = desks["research"].make_hub()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.tools import Tool
from voicehub.delivery.policy import DeliveryStrategy
from voicehub.desks.agents import build_agents, desk_knowledge
from voicehub.desks.board import DEFAULT_REPORT_MESSAGE, build_blackboard, report_tool
from voicehub.desks.conversation import handoff_strategy, text_ask_user_tool
from voicehub.desks.loading import DeskConfig, load_desk_folder
from voicehub.desks.manager import Manager, build_manager
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.mcp.toolset import McpToolset
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.blackboard import BlackboardOrchestrator
from voicehub.orchestration.loop import Loop
from voicehub.orchestration.pipeline import HandoffStrategy
from voicehub.orchestration.runtime import OrchestrationRuntime
from voicehub.orchestration.state import (
    STATE_KEY,
    HasMetadata,
    get_conversation_state,
    set_conversation_state,
)
from voicehub.orchestration.supervisor import Supervisor
from voicehub.orchestration.task_tools import task_tools
from voicehub.tools.knowledge import KnowledgeBase
from voicehub.tools.registry import DeskResources

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import Store

DeliveryMode = Literal["say", "generate"]


@dataclass(frozen=True)
class Desk:
    """A runnable desk: its config, built agents, front agent, and orchestrations.

    `agents` holds every agent as the orchestrations run it (loop reviewers carry their
    `submit_verdict` tool). `extra_tools` are what the front agent gets on top of its own
    tools: `delegate_workers`, `delegate_loop`, `check_tasks`, `cancel_task` (each once);
    `tools_for` adds `ask_user` where `[ask_user]` says. `handoff` is the `[pipeline]` or
    `[swarm]` strategy (its agents carry those tools; each gets `handoff_conversation` to
    the agents it can reach when installed).
    """

    config: DeskConfig
    agents: Mapping[str, Agent]
    front_agent: Agent
    delivery_strategy: DeliveryStrategy
    extra_tools: tuple[Tool, ...] = ()
    supervisor: Supervisor | None = None
    loop: Loop | None = None
    knowledge: KnowledgeBase | None = None
    base_dir: Path = field(default_factory=Path)
    handoff: HandoffStrategy | None = None
    ask_user_tool: Tool | None = None  # the text-room one; a call brings a spoken one
    agent_tools: Mapping[str, tuple[Tool, ...]] = field(default_factory=dict)
    manager: Manager | None = None
    blackboard: BlackboardOrchestrator | None = None
    mcp: McpToolset | None = None  # the tools of its [[mcp]] servers

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def title(self) -> str:
        return self.config.title or self.config.name

    @property
    def greeting(self) -> str | None:
        """What the voice session says when a call starts (not posted into text rooms)."""
        return self.config.greeting

    @property
    def delivery_mode(self) -> DeliveryMode:
        """How the voice session speaks a result: verbatim ("say") or through the model."""
        return self.config.delivery.mode

    @property
    def handoff_instruction(self) -> str | None:
        """What an agent handed the conversation answers at once (`[pipeline]`/`[swarm]`)."""
        section = self.config.pipeline or self.config.swarm
        return section.handoff_instruction if section is not None else None

    @property
    def entry_agent(self) -> Agent:
        """The agent a new conversation starts with (see `DeskConfig.entry_agent_id`)."""
        return self.agents[self.config.entry_agent_id]

    def orchestration(self) -> Orchestration:
        """What a text room runs: the `handoff` strategy, else the front agent with its
        tools. One object serves many rooms (and one handoff handler per hub)."""
        return self.handoff if self.handoff is not None else DeskOrchestration(self)

    def call_orchestration(self) -> DeskOrchestration:
        """What a call's room runs: no agent channels (the voice session is the agent), the
        conversation state of a pipeline or swarm, the desk's name in the room metadata."""
        return DeskOrchestration(self, voice=True)

    def front_agent_with_tools(self) -> Agent:
        """The front agent with the orchestration tools added, for a voice session."""
        return self.front_agent.with_tools(*self.tools_for(self.front_agent.id))

    def tools_for(self, agent_id: str) -> tuple[Tool, ...]:
        """What the desk adds to `agent_id`'s own tools, but the per-room handoff tool: the
        delegation tools for the front agent, `[manager]`'s and `[blackboard]`'s tools for
        their agents, and (text) `ask_user` where configured."""
        tools = list(self.extra_tools) if agent_id == self.front_agent.id else []
        tools += self.agent_tools.get(agent_id, ())
        tools = _first_of_each_name(tools)  # check_tasks/cancel_task come from several
        asking = self.config.ask_user
        if self.ask_user_tool is not None and asking is not None and agent_id in asking.agents:
            tools.append(self.ask_user_tool)
        return tuple(tools)

    def handoff_targets(self, agent_id: str) -> list[str]:
        """The agents `agent_id` may hand the conversation to (none without a strategy)."""
        return self.handoff.targets_for(agent_id) if self.handoff is not None else []

    def active_agent(self, room: HasMetadata) -> Agent:
        """The agent that has the conversation in `room`: the pipeline or swarm state's
        active agent, else the entry agent (a new conversation, or a desk without one)."""
        if self.handoff is None:
            return self.front_agent
        active = get_conversation_state(room).active_agent_id
        if active is not None and active in self.config.conversation_agent_ids:
            return self.agents[active]
        return self.entry_agent

    async def aclose(self) -> None:
        """Close the model clients the desk created (OpenAI HTTP connections) and its MCP
        servers' connections."""
        if self.mcp is not None:
            await self.mcp.aclose()
        for agent in self.agents.values():
            close = getattr(agent.llm, "aclose", None)
            if close is not None:
                await close()

    def make_hub(self, *, store: Store | None = None, clock: Clock | None = None) -> Hub:
        """A hub whose rooms run this desk, delivering with the desk's strategy."""
        return Hub(
            store=store,
            clock=clock,
            orchestration=self.orchestration(),
            delivery_strategy=self.delivery_strategy,
        )


class DeskOrchestration(Orchestration):
    """Installs a desk in a room. In a text room the front agent, with the Supervisor's and
    the Loop's tools, answers; the orchestrations run their agents in child rooms.

    With `voice`, no agent channel is attached: the call's voice session runs the agent and
    answers the transcripts. A pipeline or swarm desk gets its starting conversation state
    (kept when a stored room reopens, so a reconnecting caller finds the same agent).
    """

    def __init__(self, desk: Desk, *, voice: bool = False) -> None:
        self.desk = desk
        self.voice = voice

    def agents(self) -> list[Agent]:
        return list(self.desk.agents.values())

    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        room = hub.room(room_id)
        desk = self.desk
        if desk.mcp is not None:  # discovered when the desk is first used in this process
            desk.mcp.start(hub.clock)
        # Remember the desk with the conversation, so a reconnect can find it again.
        await room.set_metadata(desk=desk.name)
        if not self.voice:
            tools = desk.tools_for(desk.front_agent.id)
            await room.attach(AgentChannel(desk.front_agent, extra_tools=tools))
        elif desk.handoff is not None and STATE_KEY not in room.metadata:
            await set_conversation_state(room, desk.handoff.initial_state())


def build_desk(config: DeskConfig, *, base_dir: str | Path | None = None) -> Desk:
    """Compose `config` into a `Desk`. Relative paths (the knowledge file) are resolved from
    `base_dir`, by default the folder of the desk file. Raises ConfigError naming the file."""
    where = str(config.source) if config.source is not None else f"desk {config.name!r}"
    if base_dir is not None:
        base = Path(base_dir)
    else:
        base = config.source.parent if config.source is not None else Path.cwd()
    knowledge = desk_knowledge(config, base, where)
    transfer = config.transfer.plan() if config.transfer is not None else None
    mcp = _mcp_toolset(config, base)
    external = mcp.tools if mcp is not None else {}
    resources = DeskResources(knowledge=knowledge, transfer=transfer, external=external)
    agents = build_agents(config, where, resources)
    strategy = config.delivery.to_strategy()
    manager = build_manager(config, agents, where=where, base=base, strategy=strategy)
    if manager is not None:
        agents[manager.agent.id] = manager.agent  # its model sees the pre-run listings
    front = agents[config.front_agent_id]
    try:
        supervisor = _supervisor(config, agents, front, strategy)
        loop = _loop(config, agents, front, strategy)
        blackboard = build_blackboard(config, agents)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    agent_tools: dict[str, list[Tool]] = {}
    if manager is not None:
        agent_tools.setdefault(manager.agent.id, []).extend(manager.tools)
    if blackboard is not None and config.blackboard is not None:
        message = config.blackboard.delegation_message or DEFAULT_REPORT_MESSAGE
        made = [report_tool(blackboard, strategy=strategy, message=message), *task_tools()]
        agent_tools.setdefault(str(config.blackboard_agent_id), []).extend(made)
    tools: list[Tool] = []
    if supervisor is not None:
        tools += supervisor.tools()
    if loop is not None:
        tools += loop.tools()
        agents.update({reviewer.id: reviewer for reviewer in loop.reviewers})
    asking = config.ask_user
    desk = Desk(
        config=config,
        agents=agents,
        front_agent=front,
        delivery_strategy=strategy,
        extra_tools=tuple(_first_of_each_name(tools)),
        supervisor=supervisor,
        loop=loop,
        agent_tools={k: tuple(v) for k, v in agent_tools.items()},
        manager=manager,
        blackboard=blackboard,
        mcp=mcp,
        knowledge=knowledge,
        base_dir=base,
        ask_user_tool=(
            text_ask_user_tool(timeout=asking.timeout, max_reasks=asking.max_reasks)
            if asking is not None
            else None
        ),
    )
    # The strategy runs each agent with what the desk adds to it (delegation, ask_user).
    members = {
        agent_id: agent.with_tools(*desk.tools_for(agent_id)) for agent_id, agent in agents.items()
    }
    try:
        handoff = handoff_strategy(config, members)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return dataclasses.replace(desk, handoff=handoff) if handoff is not None else desk


def load_desks(folder: str | Path) -> dict[str, Desk]:
    """Load and build every desk file in `folder`, by desk name."""
    return {name: build_desk(config) for name, config in load_desk_folder(folder).items()}


def _mcp_toolset(config: DeskConfig, base: Path) -> McpToolset | None:
    """The desk's MCP servers and the tools its agents name (no I/O: discovery is later)."""
    if not config.mcp:
        return None
    servers = [server.spec(config.name, base) for server in config.mcp]
    return McpToolset(config.name, servers, [n for a in config.agents for n in a.tools])


def _supervisor(
    config: DeskConfig, agents: Mapping[str, Agent], front: Agent, strategy: DeliveryStrategy
) -> Supervisor | None:
    section = config.supervisor
    if section is None:
        return None
    options: dict[str, Any] = {}
    if section.delegation_message is not None:
        options["delegation_message"] = section.delegation_message
    return Supervisor(
        front,
        [agents[worker] for worker in section.workers],
        strategy=section.strategy,
        async_delivery=True,
        task_timeout=section.task_timeout,
        delivery_strategy=strategy,
        **options,
    )


def _loop(
    config: DeskConfig, agents: Mapping[str, Agent], front: Agent, strategy: DeliveryStrategy
) -> Loop | None:
    section = config.loop
    if section is None:
        return None
    options: dict[str, Any] = {}
    if section.delegation_message is not None:
        options["delegation_message"] = section.delegation_message
    return Loop(
        agents[section.producer],
        [agents[reviewer] for reviewer in section.reviewers],
        max_iterations=section.max_iterations,
        strategy=section.strategy,
        async_delivery=True,
        front=front,
        task_timeout=section.task_timeout,
        delivery_strategy=strategy,
        **options,
    )


def _first_of_each_name(tools: Sequence[Tool]) -> list[Tool]:
    # Supervisor and Loop each bring check_tasks and cancel_task; the front needs them once.
    seen: set[str] = set()
    kept = []
    for tool in tools:
        if tool.name not in seen:
            seen.add(tool.name)
            kept.append(tool)
    return kept
