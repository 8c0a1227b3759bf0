"""Blackboard orchestration driven by a scripted orchestrator that reads the injected state."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.runner import StopReason
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.blackboard import BlackboardOrchestrator
from voicehub.orchestration.board_state import (
    ALL_COMPLETE_WARNING,
    PLANS_EXIST_WARNING,
    Blackboard,
)
from voicehub_dev.fakes.recording_llm import RecordingLLM

GUARD = 5.0
LINE = r"(?P<id>target-\d+)[^\n]*: "  # one target line of the injected summary


def rule(pattern: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"on": "instruction", "regex": pattern, "tool": tool, "arguments": arguments}


def orchestrator_llm() -> RecordingLLM:
    """Acts on the session state shown before each step, most advanced state first."""
    return RecordingLLM(
        ScriptedLLM(
            [
                rule("call finish_session now", "finish_session", summary="All written."),
                rule(LINE + "writing", "mark_target_complete", target_id="{id}"),
                rule(LINE + "planning", "delegate_writing", target_id="{id}"),
                rule(LINE + "researching", "delegate_planning", target_id="{id}"),
                rule(LINE + "pending", "delegate_research", target_id="{id}"),
                rule("targets: none", "create_target", name="{last_user}", priority="high"),
            ],
            instruction_fallback="Nothing to do.",
        )
    )


def specialist(agent_id: str, says: str) -> Agent:
    return Agent(id=agent_id, llm=ScriptedLLM([{"match": ["*"], "say": says}]))


def orchestration(llm: Any, **options: Any) -> BlackboardOrchestrator:
    return BlackboardOrchestrator(
        Agent(id="orchestrator", instructions="Coordinate the specialists.", llm=llm),
        researcher=specialist("researcher", "Tides follow the moon.\n(full notes)"),
        planner=specialist("planner", "Plan: intro, causes. Based on [{message}]"),
        writer=specialist("writer", "Guide written from [{message}]"),
        **options,
    )


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


def states(llm: RecordingLLM) -> list[str]:
    """The session state injected as the last message of each model call."""
    return [call[-1].content for call in llm.calls]


async def test_a_session_ended_by_finish_session(hub: Hub) -> None:
    llm = orchestrator_llm()
    blackboard = orchestration(llm)
    await hub.create_room("docs", orchestration=None)
    outcome = await asyncio.wait_for(blackboard.run(hub, "docs", "tides guide"), GUARD)

    assert outcome.finished and outcome.run.stop_reason is StopReason.STOP_TOOL
    assert outcome.run.steps == 6
    assert [call.name for call, _ in outcome.run.tool_calls] == [
        "create_target",
        "delegate_research",
        "delegate_planning",
        "delegate_writing",
        "mark_target_complete",
        "finish_session",
    ]
    assert outcome.text == "Session finished: 1 of 1 target(s) complete. All written."
    board = outcome.board
    assert outcome.summary.phase == "finished"
    (target,) = board.targets.values()
    assert (target.id, target.name, target.priority, target.status) == (
        "target-1",
        "tides guide",
        "high",
        "complete",
    )
    assert [(e.id, e.author) for e in board.entries] == [
        ("finding-1", "researcher"),
        ("plan-1", "planner"),
        ("artifact-1", "writer"),
    ]
    # The orchestrator sees ids and one-line summaries; specialists get the full content.
    (_, research), (_, planning), (_, writing) = outcome.run.tool_calls[1:4]
    assert research.content == (
        "Recorded finding-1 for target-1 (researching): Tides follow the moon."
    )
    assert "(full notes)" in board.of("plan")[0].content
    assert "Plans:\n- Plan: intro, causes." in board.of("artifact")[0].content
    assert writing.content.startswith("Recorded artifact-1 for target-1 (writing): Guide written")
    assert planning.content.startswith("Recorded plan-1")
    # Every specialist ran in a child room of the session's room.
    tasks = await hub.store.list_tasks(parent_room_id="docs")
    assert [t.agent_id for t in tasks] == ["researcher", "planner", "writer"]
    assert tasks[0].input == "Research for 'tides guide'"


async def test_the_summary_is_injected_before_each_step_with_warnings(hub: Hub) -> None:
    llm = orchestrator_llm()
    await hub.create_room("docs", orchestration=None)
    await asyncio.wait_for(orchestration(llm).run(hub, "docs", "tides guide"), GUARD)

    shown = states(llm)
    assert len(shown) == 6
    assert shown[0] == (
        "Session state before step 1:\nphase: intake\nfindings: 0\nplans: 0\nartifacts: 0\n"
        "targets: none"
    )
    assert "  - target-1 tides guide [high]: pending" in shown[1]
    assert all(PLANS_EXIST_WARNING not in s for s in shown[:3])
    assert PLANS_EXIST_WARNING in shown[3]  # after planning: no new targets, no re-research
    assert "phase: writing" in shown[4]
    assert shown[5].endswith(
        "targets:\n  - target-1 tides guide [high]: complete\n" + ALL_COMPLETE_WARNING
    )
    assert PLANS_EXIST_WARNING not in shown[5]
    # The state is shown, not stored: the history has no injected messages.
    assert all(m.role != "system" or "Session state" not in m.content for m in llm.calls[-1][:-1])


async def test_a_session_ended_by_the_step_limit(hub: Hub) -> None:
    busy = ScriptedLLM([rule("phase", "check_session_status")])
    blackboard = orchestration(busy, max_steps=4)
    await hub.create_room("docs", orchestration=None)
    outcome = await asyncio.wait_for(blackboard.run(hub, "docs", "tides"), GUARD)
    assert not outcome.finished
    assert outcome.run.stop_reason is StopReason.STEP_LIMIT
    assert outcome.run.steps == 4
    assert [call.name for call, _ in outcome.run.tool_calls] == ["check_session_status"] * 4
    assert outcome.summary.phase == "intake"
    default = orchestration(busy)
    assert default.max_steps == 30 and default.orchestrator.max_steps == 30


async def test_tool_errors_are_explained() -> None:
    board = Blackboard()
    tools = {t.name: t for t in orchestration(ScriptedLLM()).tools(board)}
    missing = await tools["delegate_research"].invoke({"target_id": "target-9"})
    assert missing.is_error and "no target 'target-9'; targets: none yet" in missing.content
    board.add_target("a")
    await tools["mark_target_complete"].invoke({"target_id": "target-1"})
    done = await tools["delegate_writing"].invoke({"target_id": "target-1"})
    assert done.is_error and "target-1 is already complete" in done.content
    read = await tools["blackboard_read_summary"].invoke({})
    assert '"status": "complete"' in read.content
    with pytest.raises(ConfigError, match="distinct agent ids"):
        BlackboardOrchestrator(
            specialist("x", ""),
            researcher=specialist("x", ""),
            planner=specialist("p", ""),
            writer=specialist("w", ""),
        )


async def test_installed_in_a_text_room(hub: Hub) -> None:
    llm = orchestrator_llm()
    blackboard = orchestration(llm)
    room = await hub.create_room("docs", orchestration=blackboard)
    text = TextChannel("web")
    await room.attach(text)
    await asyncio.wait_for(text.send(room, "tides guide"), GUARD)
    assert [e.text for e in text.pending("docs")] == [
        "Session finished: 1 of 1 target(s) complete. All written."
    ]
    assert blackboard.board("docs").finished
    calls = [e for e in await hub.history("docs") if e.kind is EventKind.TOOL_CALL]
    assert len(calls) == 6
    await hub.close_room("docs")
    assert blackboard.board("docs").targets == {}  # the closed room's board was dropped
