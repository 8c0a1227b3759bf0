"""The directory: which agents and workflows a manager agent can route work to.

Agents come with a source label (the desk file they were declared in, or whatever the caller
says). Workflows are small TOML files, one per file, in `channels/workflows/`:

    name = "market-brief"             # optional; defaults to the file name without .toml
    description = "A short, checked brief on a market or technology."
    goal = "Give the caller the main facts, double-checked, in a few sentences."
    keywords = ["market", "brief"]
    when_to_use = "The caller wants an overview they can act on."
    when_not_to_use = "A single quick fact: ask an agent directly."
    ephemeral = false                 # true for a temporary workflow left by an earlier session

    [[steps]]                         # optional; run in order, each in its own child room
    agent = "analyst-a"               # an agent of the directory
    task = "Find the main facts about {instruction}."   # also {goal} and {previous}

Names are what a model types, so lookups are exact and `close_matches` offers near misses.
When two desk files declare the same agent id, the first one (in file-name order) wins, the
way a shell's PATH does; the later one is shadowed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from voicehub.agents.agent import Agent
from voicehub.core.toml_files import invalid_file, read_toml
from voicehub.errors import ConfigError

Kind = Literal["agent", "workflow"]


class AgentSummary(BaseModel):
    """What `list_agents` tells a model about one agent."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    source: str = ""
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""

    @classmethod
    def of(cls, agent: Agent, source: str) -> AgentSummary:
        """The summary of `agent`, found in `source`."""
        return cls(
            name=agent.id,
            description=agent.description,
            source=source,
            keywords=agent.keywords,
            when_to_use=agent.when_to_use,
            when_not_to_use=agent.when_not_to_use,
        )


class WorkflowSummary(BaseModel):
    """What `list_workflows` tells a model about one workflow."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    goal: str = ""
    path: str = ""
    ephemeral: bool = False
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""


class WorkflowStep(BaseModel):
    """One step of a workflow: an agent and the task it gets. The task is a template with
    `{instruction}` (what the manager asked), `{goal}` and `{previous}` (the last output)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    task: str = "{instruction}"


class Workflow(BaseModel):
    """A workflow: its summary and the steps that carry it out (none: it is only announced)."""

    model_config = ConfigDict(frozen=True)

    summary: WorkflowSummary
    steps: tuple[WorkflowStep, ...] = ()

    @property
    def name(self) -> str:
        """The workflow's name (from its summary)."""
        return self.summary.name


class Directory:
    """Agents (each with a source label) and workflows a manager may delegate to."""

    def __init__(
        self,
        agents: Sequence[tuple[Agent, str]] = (),
        workflows: Sequence[Workflow | WorkflowSummary] = (),
    ) -> None:
        self._agents: dict[str, tuple[Agent, str]] = {}
        for agent, source in agents:
            self._agents.setdefault(agent.id, (agent, source))  # first one wins
        self._workflows: dict[str, Workflow] = {}
        for item in workflows:
            workflow = item if isinstance(item, Workflow) else Workflow(summary=item)
            where = workflow.summary.path or f"workflow {workflow.name!r}"
            other = self._workflows.get(workflow.name)
            if other is not None:
                raise ConfigError(
                    f"{where}: name: workflow name {workflow.name!r} is already used by "
                    f"{other.summary.path or 'another workflow'}; workflow names must be unique"
                )
            for index, step in enumerate(workflow.steps):
                if step.agent not in self._agents:
                    raise ConfigError(
                        f"{where}: steps[{index}].agent: unknown agent {step.agent!r}; "
                        f"known agents: {_names(self._agents)}"
                    )
            self._workflows[workflow.name] = workflow

    @classmethod
    def from_folder(cls, channels_dir: str | Path) -> Directory:
        """Agents from the `[[agents]]` tables of every desk file `channels_dir/*.toml`, and
        workflows from `channels_dir/workflows/*.toml`. Raises ConfigError naming the file
        and the field of the first problem."""
        folder = Path(channels_dir)
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such channels folder")
        agents = [
            (agent, path.name)
            for path in sorted(folder.glob("*.toml"))
            for agent in _desk_agents(path)
        ]
        return cls(agents, load_workflows(folder / "workflows"))

    # -- lookups -----------------------------------------------------------------------------

    @property
    def agent_names(self) -> list[str]:
        """Every agent name, sorted."""
        return sorted(self._agents)

    @property
    def workflow_names(self) -> list[str]:
        """Every workflow name, sorted."""
        return sorted(self._workflows)

    def agent(self, name: str) -> Agent | None:
        """The agent named exactly `name`, or None."""
        found = self._agents.get(name)
        return found[0] if found is not None else None

    def workflow(self, name: str) -> Workflow | None:
        """The workflow named exactly `name`, or None."""
        return self._workflows.get(name)

    def agent_summaries(self) -> list[AgentSummary]:
        """Every agent, in the order given."""
        return [AgentSummary.of(agent, source) for agent, source in self._agents.values()]

    def workflow_summaries(self) -> list[WorkflowSummary]:
        """Every workflow, in the order given."""
        return [workflow.summary for workflow in self._workflows.values()]

    def close_matches(self, kind: Kind, name: str, limit: int = 3) -> list[str]:
        """Known names of `kind` that look like `name` (a typo, a different case, a part)."""
        known = self.agent_names if kind == "agent" else self.workflow_names
        lowered = {candidate.lower(): candidate for candidate in known}
        wanted = name.strip().lower()
        matches = difflib.get_close_matches(wanted, list(lowered), n=limit, cutoff=0.6)
        # A part of a name ("analyst" for "analyst-a") is a near miss difflib may rank low.
        matches += [c for c in lowered if wanted and wanted in c and c not in matches]
        return [lowered[m] for m in matches[:limit]]


# -- reading files -----------------------------------------------------------------------------


class _DeskAgent(BaseModel):
    """The discovery fields of one `[[agents]]` table; the desk loader checks the rest."""

    model_config = ConfigDict(extra="ignore")

    id: str
    role: str = ""
    description: str = ""
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""


class _WorkflowFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str
    goal: str
    ephemeral: bool = False
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""
    steps: tuple[WorkflowStep, ...] = Field(default_factory=tuple)

    @field_validator("name")
    @classmethod
    def _usable_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(ch.isspace() for ch in value)):
            raise ValueError(f"workflow name {value!r} must be non-empty and contain no spaces")
        return value


def _desk_agents(path: Path) -> list[Agent]:
    tables = read_toml(path, "desk file").get("agents", [])
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: agents: must be a list of [[agents]] tables")
    agents = []
    for index, table in enumerate(tables):
        try:
            entry = _DeskAgent.model_validate(table)
            agents.append(Agent(**entry.model_dump()))
        except ValidationError as exc:
            raise invalid_file(path, exc, at=("agents", index)) from None
    return agents


def load_workflows(folder: str | Path) -> list[Workflow]:
    """The workflows of `folder/*.toml` in file-name order (none when the folder is missing).
    Raises ConfigError naming the file and the field of the first problem."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    return [_workflow(path) for path in paths]


def _workflow(path: Path) -> Workflow:
    try:
        parsed = _WorkflowFile.model_validate(read_toml(path, "workflow file"))
    except ValidationError as exc:
        raise invalid_file(path, exc) from None
    summary = WorkflowSummary(
        name=parsed.name or path.stem,
        path=str(path),
        **parsed.model_dump(exclude={"name", "steps"}),
    )
    return Workflow(summary=summary, steps=parsed.steps)


def _names(table: dict[str, Any]) -> str:
    return ", ".join(sorted(table)) or "none"
