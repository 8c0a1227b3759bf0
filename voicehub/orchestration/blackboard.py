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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage
from voicehub.agents.runner import PrepareStep, RunResult, StopReason
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.errors import ConfigError, ToolError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.board_state import (
    FINISH_TOOL,
    Blackboard,
    EntryKind,
    Priority,
    SessionSummary,
    Target,
    TargetStatus,
)
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime

if TYPE_CHECKING:
    from voicehub.core.room import Room

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
