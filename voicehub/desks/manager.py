"""A desk's `[manager]`: the directory it routes over, its tools, and its pre-run listings.

The directory lists the desk's own agents (all but the manager unless `agents` names some),
then the workers of the desk files named in `desks` (the agents that do not talk with the
caller there, built with their own knowledge and tools, not their sections), and the
workflows of `workflows/` next to the desk file (all, or those named). When two of
them share an id the first wins (`Directory`): the desk's own agent.

The manager agent's model is wrapped in a `PreRunLLM`, so `list_agents` and `list_workflows`
run before every model call in text rooms and on calls alike. `delegate` runs in the
background (results delivered like `delegate_workers`, plus `check_tasks`/`cancel_task`) or,
with `mode = "answer"`, answers the tool with the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool
from voicehub.delivery.policy import DeliveryStrategy
from voicehub.desks.agents import build_agents, desk_knowledge
from voicehub.desks.config import DeskConfig
from voicehub.desks.loading import load_desk_folder
from voicehub.errors import ConfigError
from voicehub.orchestration.directory import Directory, Workflow, load_workflows
from voicehub.orchestration.manager_tools import (
    DEFAULT_BACKGROUND_MESSAGE,
    InBackground,
    PreRun,
    PreRunLLM,
    manager_tools,
)
from voicehub.orchestration.task_tools import task_tools
from voicehub.tools.registry import DeskResources


@dataclass(frozen=True)
class Manager:
    """The built `[manager]`: the agent (its model wrapped), its tools, its directory."""

    agent: Agent
    tools: tuple[Tool, ...]
    directory: Directory


def build_manager(
    config: DeskConfig,
    agents: Mapping[str, Agent],
    *,
    where: str,
    base: Path,
    strategy: DeliveryStrategy,
) -> Manager | None:
    """The `[manager]` of `config` over its built `agents` (None without the section).
    Relative names (other desks, workflows) are looked up in `base`, the desk's folder."""
    section, holder = config.manager, config.manager_agent_id
    if section is None or holder is None:
        return None
    own_label = config.source.name if config.source is not None else config.name
    own_ids = section.agents or tuple(a for a in agents if a != holder)
    listed = [(agents[agent_id], own_label) for agent_id in own_ids]
    listed += _other_desks(section.desks, base, where)
    workflows = _workflows(section.workflows, base / "workflows", where)
    try:
        directory = Directory(listed, workflows)
    except ConfigError as exc:
        raise ConfigError(
            f"{where}: manager.workflows: {exc} (list the desk declaring it in manager.desks)"
        ) from None
    background = None
    if section.mode == "background":
        background = InBackground(
            strategy, section.delegation_message or DEFAULT_BACKGROUND_MESSAGE
        )
    tools = manager_tools(directory, timeout=section.task_timeout, background=background)
    pre_run = PreRun(tools[:2])  # list_agents, list_workflows: read-only, no room needed
    agent = agents[holder]
    if agent.llm is not None:
        agent = agent.model_copy(update={"llm": PreRunLLM(agent.llm, pre_run)})
    extra = task_tools() if background is not None else []
    # The listings are pre-run; the model still gets them as tools to look again.
    return Manager(agent, tuple([*tools, *extra]), directory)


def _other_desks(names: tuple[str, ...], folder: Path, where: str) -> list[tuple[Agent, str]]:
    if not names:
        return []
    found = {config.name: config for config in load_desk_folder(folder).values()}
    listed: list[tuple[Agent, str]] = []
    for j, name in enumerate(names):
        other = found.get(name)
        if other is None:
            known = ", ".join(sorted(found)) or "none"
            raise ConfigError(
                f"{where}: manager.desks[{j}]: no desk {name!r} in {folder} ({known})"
            )
        other_where = str(other.source) if other.source is not None else name
        resources = DeskResources(knowledge=desk_knowledge(other, folder, other_where))
        label = other.source.name if other.source is not None else name
        built = build_agents(other, other_where, resources)
        # Its front agents need its sections (delegate_workers, handoffs): only workers come.
        talking = set(other.conversation_agent_ids)
        listed += [(agent, label) for agent in built.values() if agent.id not in talking]
    return listed


def _workflows(names: tuple[str, ...] | None, folder: Path, where: str) -> list[Workflow]:
    try:
        available = load_workflows(folder)
    except ConfigError as exc:
        raise ConfigError(f"{where}: manager.workflows: {exc}") from None
    if names is None:
        return available
    by_name = {workflow.name: workflow for workflow in available}
    chosen = []
    for j, name in enumerate(names):
        workflow = by_name.get(name)
        if workflow is None:
            known = ", ".join(sorted(by_name)) or "none"
            raise ConfigError(
                f"{where}: manager.workflows[{j}]: no workflow {name!r} in {folder} ({known})"
            )
        chosen.append(workflow)
    return chosen
