"""Desks: a validated desk file composed into something that runs.

`build_desk(config)` builds the agents (their LLMs and builtin tools), the `Supervisor` and/or
`Loop` in background (voice) mode, and the delivery strategy. `Desk.orchestration()` installs
the front agent into a room with the tools those orchestrations give it; `Desk.make_hub()`
gives a hub whose rooms all run the desk.

    desks = load_desks("channels")
    hub = desks["research"].make_hub()
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import LLM
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool
from voicehub.config import AgentConfig, DeskConfig, load_desk_folder
from voicehub.core.hub import Hub
from voicehub.delivery.policy import DeliveryStrategy
from voicehub.errors import ConfigError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.loop import Loop
from voicehub.orchestration.supervisor import Supervisor
from voicehub.tools.knowledge import KnowledgeBase
from voicehub.tools.registry import DeskResources, make_tool

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import Store

DeliveryMode = Literal["say", "generate"]


@dataclass(frozen=True)
class Desk:
    """A runnable desk: its config, built agents, front agent, and orchestrations.

    `agents` holds every agent as the orchestrations run it (loop reviewers carry their
    `submit_verdict` tool). `extra_tools` are what the front agent gets on top of its own
    tools: `delegate_workers`, `delegate_loop`, `check_tasks`, `cancel_task` (each once).
    `pipeline` and `swarm` sections are validated and kept in `config` but not run yet.
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

    def orchestration(self) -> DeskOrchestration:
        """The strategy to install in a room (stateless: one may serve many rooms)."""
        return DeskOrchestration(self)

    def front_agent_with_tools(self) -> Agent:
        """The front agent with the orchestration tools added, for a voice session."""
        return self.front_agent.with_tools(*self.extra_tools)

    async def aclose(self) -> None:
        """Close the model clients the desk created (OpenAI HTTP connections)."""
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
    """Installs a desk in a room: the front agent, with the Supervisor's and the Loop's
    tools, answers the room; the orchestrations run their agents in child rooms."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def agents(self) -> list[Agent]:
        return list(self.desk.agents.values())

    async def install(self, hub: Hub, room_id: str) -> None:
        room = hub.room(room_id)
        # Remember the desk with the conversation, so a reconnect can find it again.
        await room.set_metadata(desk=self.desk.name)
        desk = self.desk
        await room.attach(AgentChannel(desk.front_agent, extra_tools=desk.extra_tools))


def build_desk(config: DeskConfig, *, base_dir: str | Path | None = None) -> Desk:
    """Compose `config` into a `Desk`. Relative paths (the knowledge file) are resolved from
    `base_dir`, by default the folder of the desk file. Raises ConfigError naming the file."""
    where = str(config.source) if config.source is not None else f"desk {config.name!r}"
    if base_dir is not None:
        base = Path(base_dir)
    else:
        base = config.source.parent if config.source is not None else Path.cwd()
    knowledge = None
    if config.knowledge is not None:
        try:
            knowledge = KnowledgeBase.from_file(base / config.knowledge.file)
        except ConfigError as exc:
            raise ConfigError(f"{where}: knowledge.file: {exc}") from None
    resources = DeskResources(knowledge=knowledge)
    agents = {
        spec.id: _build_agent(spec, f"{where}: agents[{index}]", resources, config.name)
        for index, spec in enumerate(config.agents)
    }
    front = agents[config.front_agent_id]
    strategy = config.delivery.to_strategy()
    try:
        supervisor = _supervisor(config, agents, front, strategy)
        loop = _loop(config, agents, front, strategy)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    tools: list[Tool] = []
    if supervisor is not None:
        tools += supervisor.tools()
    if loop is not None:
        tools += loop.tools()
        agents.update({reviewer.id: reviewer for reviewer in loop.reviewers})
    return Desk(
        config=config,
        agents=agents,
        front_agent=front,
        delivery_strategy=strategy,
        extra_tools=tuple(_first_of_each_name(tools)),
        supervisor=supervisor,
        loop=loop,
        knowledge=knowledge,
        base_dir=base,
    )


def load_desks(folder: str | Path) -> dict[str, Desk]:
    """Load and build every desk file in `folder`, by desk name."""
    return {name: build_desk(config) for name, config in load_desk_folder(folder).items()}


def _build_agent(spec: AgentConfig, where: str, resources: DeskResources, desk: str) -> Agent:
    try:
        tools = tuple(make_tool(name, resources) for name in spec.tools)
        llm = _build_llm(spec)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return Agent(
        id=spec.id,
        role=spec.role,
        description=spec.description,
        instructions=spec.instructions,
        llm=llm,
        tools=tools,
        keywords=spec.keywords,
        when_to_use=spec.when_to_use,
        when_not_to_use=spec.when_not_to_use,
        voice=spec.voice,
        max_steps=spec.max_steps,
        metadata={"desk": desk},
    )


def _build_llm(spec: AgentConfig) -> LLM:
    settings = spec.llm
    if settings.provider == "scripted":
        scripted = spec.scripted
        if scripted is None:
            return ScriptedLLM()
        return ScriptedLLM(
            scripted.rules,
            fallback=scripted.fallback,
            instruction_fallback=scripted.instruction_fallback,
        )
    # Imported here: the openai extra is optional and only needed by desks that use it.
    from voicehub.agents.openai import OpenAIChatLLM

    assert settings.model is not None  # the config requires a model for provider "openai"
    key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    if settings.api_key_env and not key:
        raise ConfigError(f"llm.api_key_env: environment variable {settings.api_key_env} is unset")
    return OpenAIChatLLM(
        settings.model,
        api_key=key,
        base_url=settings.base_url,
        temperature=settings.temperature,
    )


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
