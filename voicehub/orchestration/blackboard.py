"""Blackboard orchestration: an orchestrator agent coordinates specialists through a shared board.

The board holds targets (parts of the request, each with a priority and a status moving from
pending through researching, planning and writing to complete) and what the specialists
produced for them: findings, plans and artifacts. The orchestrator only sees ids and short
summaries; specialists get the full text they need in their task (the planner the findings,
the writer the plan and the findings).

Before each step the orchestrator is shown the session summary, with two warnings when they
apply: plans exist (do not create targets or research again) and all targets are complete
(call finish_session now). The run ends when finish_session is called, or at the step limit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage
from voicehub.agents.runner import PrepareStep, RunResult, StopReason
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.errors import ConfigError, ToolError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime

if TYPE_CHECKING:
    from voicehub.core.room import Room

TargetStatus = Literal["pending", "researching", "planning", "writing", "complete"]
Priority = Literal["high", "medium", "low"]
EntryKind = Literal["finding", "plan", "artifact"]
Work = Literal["research", "planning", "writing"]

# What each delegation sets the target's status to, records, and hands the specialist.
_WORK: dict[Work, tuple[TargetStatus, EntryKind]] = {
    "research": ("researching", "finding"),
    "planning": ("planning", "plan"),
    "writing": ("writing", "artifact"),
}
_NEEDS: dict[Work, tuple[EntryKind, ...]] = {
    "research": (),
    "planning": ("finding",),
    "writing": ("plan", "finding"),
}

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


@dataclass
class BlackboardRun:
    """How a session run ended: the board, its final summary, and the agent's run."""

    board: Blackboard
    run: RunResult
    text: str
    summary: SessionSummary = field(init=False)

    def __post_init__(self) -> None:
        self.summary = self.board.summary()

    @property
    def finished(self) -> bool:
        """True when finish_session ended the run (not the step limit)."""
        return self.run.stop_reason is StopReason.STOP_TOOL


class BlackboardOrchestrator(Orchestration):
    """Runs `orchestrator` with the board tools over specialists for research, planning and
    writing. Installed in a room, it runs one session per user message on that room's board."""

    def __init__(
        self,
        orchestrator: Agent,
        *,
        researcher: Agent,
        planner: Agent,
        writer: Agent,
        max_steps: int = 30,
        task_timeout: float | None = None,
    ) -> None:
        if max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {max_steps}")
        ids = [orchestrator.id, researcher.id, planner.id, writer.id]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"orchestrator and specialists need distinct agent ids, got {ids}")
        self.orchestrator = orchestrator.model_copy(update={"max_steps": max_steps})
        self.specialists = {"research": researcher, "planning": planner, "writing": writer}
        self.max_steps = max_steps
        self.task_timeout = task_timeout
        self._boards: dict[str, Blackboard] = {}

    def agents(self) -> list[Agent]:
        """The orchestrator and the three specialists."""
        return [self.orchestrator, *self.specialists.values()]

    def board(self, room_id: str) -> Blackboard:
        """The board of `room_id` (created on first use, dropped when the room closes)."""
        return self._boards.setdefault(room_id, Blackboard())

    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        """Attach the orchestrator: each user message runs a session on the room's board."""

        async def respond(channel: AgentChannel, event: Event, room: Room) -> None:
            outcome = await self.run(hub, room.id, event.text)
            if outcome.text:
                await channel.say(room, outcome.text)

        async def forget(event: Event, context: HookContext) -> None:
            self._boards.pop(context.room_id, None)

        hub.hooks.add(HookTrigger.ON_ROOM_CLOSED, forget, room_id=room_id, name="blackboard")
        await hub.room(room_id).attach(AgentChannel(self.orchestrator, responder=respond))

    def prepare_step(self, board: Blackboard) -> PrepareStep:
        """Shows the session summary (and its warnings) as the last message of every step."""

        def prepare(step: int, messages: list[ChatMessage]) -> list[ChatMessage]:
            state = f"Session state before step {step}:\n{board.summary().render()}"
            return [*messages, ChatMessage(role="system", content=state)]

        return prepare

    async def run(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        request: str,
        *,
        board: Blackboard | None = None,
    ) -> BlackboardRun:
        """Run one session on `request` in `room_id` (tool calls are recorded there)."""
        board = board if board is not None else self.board(room_id)
        board.finished = False  # a new request reopens the session
        channel = AgentChannel(
            self.orchestrator, extra_tools=self.tools(board), prepare_step=self.prepare_step(board)
        )
        run = await channel.run(
            hub.room(room_id),
            [ChatMessage(role="user", content=request)],
            stop_tools=(FINISH_TOOL,),
        )
        text = run.text
        if not text and run.stopped_by is not None:
            text = run.stopped_by[1].content
        return BlackboardRun(board, run, text)

    # -- tools ---------------------------------------------------------------------------

    def tools(self, board: Blackboard) -> list[Tool]:
        """The orchestrator's tools over `board`."""

        def create_target(name: str, description: str = "", priority: Priority = "medium") -> str:
            """Create a target (one part of the request to deliver) and get its id."""
            target = board.add_target(name, description, priority)
            return f"Created {target.id} ({target.name}, {target.priority} priority)."

        def mark_target_complete(target_id: str) -> str:
            """Mark a target complete once its artifact is written."""
            _open_target(board, target_id)
            board.set_status(target_id, "complete")
            left = sum(1 for t in board.targets.values() if t.status != "complete")
            return f"{target_id} is complete; {left} target(s) left."

        def finish_session(summary: str = "") -> str:
            """End the session (when every target is complete). Give a one-line summary."""
            board.finished = True
            done = sum(1 for t in board.targets.values() if t.status == "complete")
            note = f" {summary.strip()}" if summary.strip() else ""
            return f"Session finished: {done} of {len(board.targets)} target(s) complete.{note}"

        def check_session_status() -> str:
            """The progress of every target."""
            return board.summary().render()

        def blackboard_read_summary() -> str:
            """Read the board: targets, and the ids and summaries of findings, plans and
            artifacts (JSON)."""
            return board.read_summary()

        def delegation(work: Work, description: str) -> Tool:
            async def delegate(target_id: str, context: ToolContext, instruction: str = "") -> str:
                return await self._delegate(board, context, work, target_id, instruction)

            return Tool(delegate, name=f"delegate_{work}", description=description)

        plain = (create_target, mark_target_complete, finish_session, check_session_status)
        return [
            *(Tool(function) for function in plain),
            delegation("research", "Send a target's research to the researcher (a finding)."),
            delegation("planning", "Have the planner plan a target from its findings (a plan)."),
            delegation("writing", "Have the writer write a target from its plan (an artifact)."),
            Tool(blackboard_read_summary),
        ]

    async def _delegate(
        self,
        board: Blackboard,
        context: ToolContext,
        work: Work,
        target_id: str,
        instruction: str,
    ) -> str:
        target = _open_target(board, target_id)
        hub = orchestration_runtime(context.hub, "delegation")
        status, kind = _WORK[work]
        board.set_status(target_id, status)
        agent = self.specialists[work]
        handle = await hub.delegate(
            agent,
            _task(board, target, work, instruction),
            context.room_id,
            timeout=self.task_timeout,
        )
        result = await handle.result()
        if not result.ok:
            raise ToolError(result.describe())
        entry = board.add_entry(kind, target_id, agent.id, result.output)
        return f"Recorded {entry.id} for {target_id} ({target.status}): {entry.summary}"


def _open_target(board: Blackboard, target_id: str) -> Target:
    target = board.target(target_id)
    if target is None:
        known = ", ".join(board.targets) or "none yet (call create_target)"
        raise ToolError(f"no target {target_id!r}; targets: {known}")
    if target.status == "complete":
        raise ToolError(f"{target_id} is already complete; finish the session or pick another")
    return target


def _task(board: Blackboard, target: Target, work: Work, instruction: str) -> str:
    """The specialist's task: the target, the instruction, and the board content it needs."""
    lines = [f"{work.capitalize()} for {target.name!r}: {target.description}".rstrip(": ")]
    if instruction.strip():
        lines.append(instruction.strip())
    for kind in _NEEDS[work]:
        entries = board.of(kind, target.id)
        if entries:
            lines.append(f"\n{kind.capitalize()}s:")
            lines += [f"- {e.content}" for e in entries]
    return "\n".join(lines)
