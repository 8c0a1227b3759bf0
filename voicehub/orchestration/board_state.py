"""The blackboard's state: targets, the findings, plans and artifacts recorded for them, and
the session summary the orchestrator sees before each step (with its warnings).

`orchestration.blackboard` runs the session over it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

TargetStatus = Literal["pending", "researching", "planning", "writing", "complete"]
Priority = Literal["high", "medium", "low"]
EntryKind = Literal["finding", "plan", "artifact"]

FINISH_TOOL = "finish_session"
BOARD_TOOLS = (
    "create_target",
    "mark_target_complete",
    FINISH_TOOL,
    "check_session_status",
    "delegate_research",
    "delegate_planning",
    "delegate_writing",
    "blackboard_read_summary",
)
"""The orchestrator's tool names, in the order `BlackboardOrchestrator.tools` gives them."""
PLANS_EXIST_WARNING = (
    "WARNING: plans exist. Do not create new targets or research again; write the planned "
    "targets and mark them complete."
)
ALL_COMPLETE_WARNING = "WARNING: all targets are complete. Call finish_session now."


@dataclass
class Target:
    """One part of the request the session must deliver."""

    id: str
    name: str
    description: str = ""
    priority: Priority = "medium"
    status: TargetStatus = "pending"


@dataclass(frozen=True)
class Entry:
    """A finding, plan or artifact a specialist produced for a target."""

    id: str
    kind: EntryKind
    target_id: str
    author: str
    content: str

    @property
    def summary(self) -> str:
        """The first line, cut to 160 characters: what the orchestrator sees."""
        first = self.content.strip().split("\n", 1)[0]
        return first if len(first) <= 160 else first[:157] + "..."


class TargetSummary(BaseModel):
    """A target as the orchestrator sees it."""

    id: str
    name: str
    priority: Priority
    status: TargetStatus


class SessionSummary(BaseModel):
    """The state of a session at a glance."""

    phase: str
    targets: list[TargetSummary]
    total_findings: int
    total_plans: int
    total_artifacts: int
    finished: bool = False

    @property
    def all_complete(self) -> bool:
        """True when there are targets and every one is complete."""
        return bool(self.targets) and all(t.status == "complete" for t in self.targets)

    def warnings(self) -> list[str]:
        """What the orchestrator must not miss right now."""
        if self.finished:
            return []
        if self.all_complete:
            return [ALL_COMPLETE_WARNING]
        return [PLANS_EXIST_WARNING] if self.total_plans else []

    def render(self) -> str:
        """Lines for the orchestrator's context: counts, each target's status, warnings."""
        lines = [
            f"phase: {self.phase}",
            f"findings: {self.total_findings}",
            f"plans: {self.total_plans}",
            f"artifacts: {self.total_artifacts}",
        ]
        if self.targets:
            lines.append("targets:")
            lines += [f"  - {t.id} {t.name} [{t.priority}]: {t.status}" for t in self.targets]
        else:
            lines.append("targets: none")
        return "\n".join([*lines, *self.warnings()])


class Blackboard:
    """Targets and the findings, plans and artifacts recorded for them, with short ids."""

    def __init__(self) -> None:
        self.targets: dict[str, Target] = {}
        self.entries: list[Entry] = []
        self.finished = False

    def add_target(self, name: str, description: str = "", priority: Priority = "medium") -> Target:
        """Add a pending target (ids: target-1, target-2...)."""
        target = Target(f"target-{len(self.targets) + 1}", name, description, priority)
        self.targets[target.id] = target
        return target

    def target(self, target_id: str) -> Target | None:
        """The target with `target_id`, or None."""
        return self.targets.get(target_id)

    def set_status(self, target_id: str, status: TargetStatus) -> None:
        """Move a target to `status`."""
        self.targets[target_id].status = status

    def add_entry(self, kind: EntryKind, target_id: str, author: str, content: str) -> Entry:
        """Record a finding, plan or artifact (ids count per kind: finding-1, plan-1...)."""
        number = sum(1 for e in self.entries if e.kind == kind) + 1
        entry = Entry(f"{kind}-{number}", kind, target_id, author, content)
        self.entries.append(entry)
        return entry

    def of(self, kind: EntryKind, target_id: str | None = None) -> list[Entry]:
        """The entries of `kind` (for one target, or all), oldest first."""
        return [e for e in self.entries if e.kind == kind and target_id in (None, e.target_id)]

    def summary(self) -> SessionSummary:
        """The session at a glance: phase, targets with statuses, counts."""
        targets = list(self.targets.values())
        return SessionSummary(
            phase=_phase(targets, self.finished),
            targets=[
                TargetSummary(id=t.id, name=t.name, priority=t.priority, status=t.status)
                for t in targets
            ],
            total_findings=len(self.of("finding")),
            total_plans=len(self.of("plan")),
            total_artifacts=len(self.of("artifact")),
            finished=self.finished,
        )

    def read_summary(self) -> str:
        """The board as JSON: targets, and ids with summaries (never the full content)."""
        return json.dumps(
            {
                "session": self.summary().model_dump(mode="json"),
                "entries": [
                    {"id": e.id, "target_id": e.target_id, "by": e.author, "summary": e.summary}
                    for e in self.entries
                ],
            }
        )


def _phase(targets: Sequence[Target], finished: bool) -> str:
    """The earliest stage any open target is at (the session waits for its slowest part)."""
    if finished or not targets:
        return "finished" if finished else "intake"
    statuses = {t.status for t in targets}
    for status in ("pending", "researching", "planning", "writing"):  # earliest first
        if status in statuses:
            return "research" if status in ("pending", "researching") else status
    return "complete"
