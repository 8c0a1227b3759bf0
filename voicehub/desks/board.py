"""A desk's `[blackboard]`: the orchestrator and its specialists, and `start_report`.

`start_report(request)` answers at once; the session runs as a background job of the room
(so "never mind" cancels it with `cancel_task`) on a board of its own, and its artifacts go to
the delivery service, like `delegate_workers`' results. The orchestrator's tool calls are
recorded in the room, so the transcript shows the session's progress; the specialists run in
child rooms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool, ToolContext
from voicehub.delivery.policy import DeliveryStrategy
from voicehub.desks.config import REPORT_TOOL, DeskConfig
from voicehub.errors import ToolError
from voicehub.orchestration.blackboard import BlackboardOrchestrator, BlackboardRun
from voicehub.orchestration.board_state import Blackboard
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime

DEFAULT_REPORT_MESSAGE = "I'll read you the report as soon as it's written."


def build_blackboard(
    config: DeskConfig, agents: Mapping[str, Agent]
) -> BlackboardOrchestrator | None:
    """The orchestrator `config`'s `[blackboard]` declares (None without the section)."""
    section = config.blackboard
    if section is None:
        return None
    return BlackboardOrchestrator(
        agents[section.orchestrator],
        researcher=agents[section.researcher],
        planner=agents[section.planner],
        writer=agents[section.writer],
        max_steps=section.max_steps,
        task_timeout=section.task_timeout,
    )


def report_tool(
    orchestrator: BlackboardOrchestrator,
    *,
    strategy: DeliveryStrategy,
    message: str = DEFAULT_REPORT_MESSAGE,
) -> Tool:
    """`start_report(request)`: run a blackboard session in the background and deliver its
    artifacts."""

    async def start_report(request: str, context: ToolContext) -> str:
        """Start a written report on the caller's request (a topic, or what it should
        cover). It is researched, planned and written in the background and read out when
        ready; the tool returns at once."""
        hub = orchestration_runtime(context.hub, REPORT_TOOL)
        if not request.strip():
            raise ToolError("request is empty: say what the report should be about")
        hub.jobs.start(
            _report(hub, orchestrator, context.room_id, request.strip(), strategy),
            room_id=context.room_id,
        )
        return json.dumps({"status": "started", "request": request, "message": message})

    return Tool(start_report)


async def _report(
    hub: OrchestrationRuntime,
    orchestrator: BlackboardOrchestrator,
    room_id: str,
    request: str,
    strategy: DeliveryStrategy,
) -> None:
    # A board per report: two reports in one conversation must not share targets.
    outcome = await orchestrator.run(hub, room_id, request, board=Blackboard())
    await hub.deliver(
        room_id,
        report_text(outcome, request),
        strategy,
        metadata={
            "kind": "blackboard",
            "task": request,
            "finished": outcome.finished,
            "artifacts": [e.id for e in outcome.board.of("artifact")],
            "steps": len(outcome.run.tool_calls),
        },
    )


def report_text(outcome: BlackboardRun, request: str) -> str:
    """What the caller hears: the artifacts, in order; or why there are none."""
    artifacts = [entry.content.strip() for entry in outcome.board.of("artifact")]
    if artifacts:
        return "\n".join(artifacts)
    why = "it stopped at its step limit" if not outcome.finished else "nothing was written"
    return f"Sorry, the report on {request} is not ready: {why}."
