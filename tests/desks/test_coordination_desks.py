"""The frontdesk ([manager]) and report ([blackboard], plan-and-execute) desks of `channels/`,
run in text rooms on a virtual clock; and the desk-building errors of those sections."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.desks.test_desk import CHANNELS, OpenCall, TextCall, open_call  # noqa: F401
from voicehub.agents.llm import ChatMessage
from voicehub.agents.tools import ToolContext
from voicehub.core.events import EventKind
from voicehub.core.store.base import DeliveryStatus, TaskStatus
from voicehub.desks.desk import Desk, build_desk, load_desks
from voicehub.desks.loading import load_desk_file
from voicehub.errors import ConfigError
from voicehub.orchestration.blackboard import BlackboardOrchestrator
from voicehub.orchestration.board_state import BOARD_TOOLS, Blackboard
from voicehub.orchestration.manager_tools import PRE_RUN_HEADER, PreRunLLM

GUARD = 5.0
HEAT_PUMPS = "A heat pump moves heat from the outside air or the ground into your home."


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return load_desks(CHANNELS)


@pytest.fixture
async def frontdesk(desks: dict[str, Desk], open_call: OpenCall) -> AsyncIterator[TextCall]:  # noqa: F811
    yield await open_call(desks["frontdesk"])


async def delivered(call: TextCall) -> list[str]:
    return [event.text for event in await call.deliveries(after=2.0)]


# -- frontdesk: the manager ---------------------------------------------------------------


async def test_the_manager_sees_its_listings_before_every_model_call(
    desks: dict[str, Desk],
) -> None:
    desk = desks["frontdesk"]
    llm = desk.agents["desk"].llm
    assert isinstance(llm, PreRunLLM)
    prepared = await llm.pre_run.prepare_step(
        1, [ChatMessage(role="system", content="You run"), ChatMessage(role="user", content="hi")]
    )
    assert [m.role for m in prepared] == ["system", "system", "user"]
    listing = prepared[1].content
    assert listing.startswith(PRE_RUN_HEADER)
    agents_json, workflows_json = (block.split(":\n", 1)[1] for block in listing.split("\n\n")[1:])
    agents = {entry["name"]: entry["source"] for entry in json.loads(agents_json)}
    # Its own note writer, the research desk's analysts; not itself, nor research's front.
    assert agents == {
        "note-writer": "frontdesk.toml",
        "analyst-a": "research.toml",
        "analyst-b": "research.toml",
    }
    assert [w["name"] for w in json.loads(workflows_json)] == ["market-brief", "support-escalation"]
    assert [t.name for t in desk.tools_for("desk")] == [
        "list_agents",
        "list_workflows",
        "delegate",
        "check_tasks",
        "cancel_task",
        "ask_user",
    ]


async def test_research_runs_the_workflow_in_the_background_and_is_delivered(
    frontdesk: TextCall,
) -> None:
    said = await frontdesk.say("could you research heat pumps for me please")
    assert said == [
        "Sure, I'll have the market brief team look into heat pumps.",
        "I'll tell you the result as soon as it's ready.",
    ]
    (result,) = await delivered(frontdesk)
    # The steps' answers, in order, without agent ids for the caller to hear; the second
    # step read the same entry again, so its restatement is left out.
    assert result == f"Here is what I found. {HEAT_PUMPS}" + result.split(HEAT_PUMPS)[1]
    assert result.count(HEAT_PUMPS) == 1
    tasks = await frontdesk.hub.store.list_tasks(parent_room_id="call-1")
    assert [(t.agent_id, t.input, t.status) for t in tasks] == [
        ("analyst-a", "heat pumps", TaskStatus.OK),
        ("analyst-b", "heat pumps", TaskStatus.OK),
    ]
    (record,) = await frontdesk.hub.store.list_deliveries(room_id="call-1")
    assert record.status is DeliveryStatus.DELIVERED
    assert record.metadata["delegate_kind"] == "workflow"
    assert record.metadata["name"] == "market-brief"


async def test_a_note_goes_to_the_agent_by_name(frontdesk: TextCall) -> None:
    said = await frontdesk.say("could you write about solar panels for me please")
    assert said[0] == "Sure, I'll have our note writer write about solar panels."
    (result,) = await delivered(frontdesk)
    assert result.startswith("Here is a short note. Solar panels turn sunlight into electricity.")


async def test_an_unclear_request_is_asked_about(frontdesk: TextCall) -> None:
    room, text = frontdesk.room, frontdesk.text
    turn = asyncio.create_task(text.send(room, "can you help me please"))
    question = await asyncio.wait_for(text.receive(room.id), GUARD)
    assert question.source == "desk"
    assert question.text == "Should I have it researched, or a note written?\n1. Research\n2. Note"
    await asyncio.wait_for(text.send(room, "a note"), GUARD)
    await asyncio.wait_for(turn, GUARD)
    assert [e.text for e in text.pending(room.id)][-1] == (
        "Thanks. For Note, say research or write, and then the topic."
    )


async def test_an_unknown_name_is_refused_before_anything_runs(
    frontdesk: TextCall, desks: dict[str, Desk]
) -> None:
    delegate = next(t for t in desks["frontdesk"].tools_for("desk") if t.name == "delegate")
    context = ToolContext(hub=frontdesk.hub, room_id="call-1", agent_id="desk")
    result = await delegate.invoke(
        {"kind": "workflow", "name": "market brief", "instruction": "tides"}, context
    )
    assert result.is_error
    assert "no workflow named 'market brief'. Did you mean: market-brief?" in result.content
    await frontdesk.hub.wait_idle()
    assert await frontdesk.hub.store.list_tasks(parent_room_id="call-1") == []


# -- report: the blackboard and the plan-and-execute researcher -------------------------------


async def test_a_report_runs_on_the_blackboard_and_is_delivered(
    desks: dict[str, Desk],
    open_call: OpenCall,  # noqa: F811
) -> None:
    call = await open_call(desks["report"])
    said = await call.say("could you write a report about heat pumps please")
    assert said == [
        "Sure, I'll have a report on heat pumps researched and written.",
        "I'll read it to you as soon as it's written.",
    ]
    (report,) = await delivered(call)
    assert (
        report == f"Here is your report on heat pumps. {HEAT_PUMPS}" + report.split(HEAT_PUMPS)[1]
    )
    history = await call.hub.history("call-1")
    steps = [e.metadata["tool"] for e in history if e.kind is EventKind.TOOL_CALL]
    assert steps == [
        "start_report",
        "create_target",
        "delegate_research",
        "delegate_planning",
        "delegate_writing",
        "mark_target_complete",
        "finish_session",
    ]
    tasks = await call.hub.store.list_tasks(parent_room_id="call-1")
    assert [t.agent_id for t in tasks] == ["researcher", "outliner", "writer"]
    assert tasks[0].output.startswith(HEAT_PUMPS)  # the plan-and-execute answer
    (record,) = await call.hub.store.list_deliveries(room_id="call-1")
    assert record.metadata["kind"] == "blackboard"
    assert (record.metadata["finished"], record.metadata["artifacts"]) == (True, ["artifact-1"])


async def test_quick_research_goes_to_the_plan_and_execute_worker(
    desks: dict[str, Desk],
    open_call: OpenCall,  # noqa: F811
) -> None:
    call = await open_call(desks["report"])
    await call.say("research solar panels")
    (result,) = await delivered(call)
    assert result.startswith("Solar panels turn sunlight into electricity.")
    (task,) = await call.hub.store.list_tasks(parent_room_id="call-1")
    assert (task.agent_id, task.input) == ("researcher", "solar panels")
    # The worker planned, ran and checked: its one tool call carries the execution result.
    history = await call.hub.history("call-1::task-1")
    (outcome,) = [e for e in history if e.kind is EventKind.TOOL_RESULT]
    execution = json.loads(outcome.text)
    assert execution["success"] and execution["total_steps"] == 1
    (step,) = execution["execution_history"]
    assert step["tool_name"] == "search_knowledge"
    assert step["parameters"] == {"query": "solar panels"}
    assert step["analysis"]["next_action"] == "final_answer"


async def test_a_report_on_an_unknown_topic_says_what_is_missing(
    desks: dict[str, Desk],
    open_call: OpenCall,  # noqa: F811
) -> None:
    call = await open_call(desks["report"])
    await call.say("write a report on tides")
    (report,) = await delivered(call)
    # The researcher's plan found nothing, and said so; the writer passes it on.
    assert report == (
        "Here is your report on tides. "
        "I found nothing on Research for 'tides' in the knowledge base."
    )


def test_the_report_desk_builds_its_board(desks: dict[str, Desk]) -> None:
    desk = desks["report"]
    assert isinstance(desk.blackboard, BlackboardOrchestrator)
    assert desk.blackboard.orchestrator.id == "coordinator"
    assert desk.blackboard.max_steps == 20
    assert [t.name for t in desk.blackboard.tools(Blackboard())] == list(BOARD_TOOLS)
    assert [t.name for t in desk.tools_for("desk")] == [
        "delegate_workers",
        "check_tasks",
        "cancel_task",
        "start_report",
    ]


# -- building errors ----------------------------------------------------------------------


def desk_folder(tmp_path: Path, manager: str) -> Path:
    """The example folder's research desk and workflows, and a small manager desk."""
    shutil.copytree(CHANNELS / "knowledge", tmp_path / "knowledge")
    shutil.copytree(CHANNELS / "workflows", tmp_path / "workflows")
    shutil.copy(CHANNELS / "research.toml", tmp_path)
    path = tmp_path / "boss.toml"
    path.write_text('name = "boss"\n[[agents]]\nid = "boss"\n[[agents]]\nid = "helper"\n' + manager)
    return path


@pytest.mark.parametrize(
    ("manager", "expected"),
    [
        (
            '[manager]\ndesks = ["reserch"]\n',
            "manager.desks[0]: no desk 'reserch' in {folder} (boss, research)",
        ),
        (
            '[manager]\ndesks = ["research"]\nworkflows = ["brief"]\n',
            "manager.workflows[0]: no workflow 'brief' in {folder}/workflows "
            "(market-brief, support-escalation)",
        ),
        (
            "[manager]\n",
            "manager.workflows: {folder}/workflows/market-brief.toml: steps[0].agent: unknown "
            "agent 'analyst-a'; known agents: helper (list the desk declaring it in manager.desks)",
        ),
    ],
)
def test_manager_references_are_checked_when_the_desk_is_built(
    tmp_path: Path, manager: str, expected: str
) -> None:
    path = desk_folder(tmp_path, manager)
    with pytest.raises(ConfigError) as caught:
        build_desk(load_desk_file(path))
    assert str(caught.value) == f"{path}: " + expected.format(folder=tmp_path)


async def test_answer_mode_speaks_the_result_in_the_reply(
    tmp_path: Path,
    open_call: OpenCall,  # noqa: F811
) -> None:
    rule = (
        "[[agents.scripted.rules]]\nregex = 'ask (?P<t>.+)'\ntool = \"delegate\"\n"
        'arguments = { kind = "agent", name = "analyst-a", instruction = "{t}" }\n'
        'reply = "Answer: {result}"\n'
    )
    text = (
        'name = "boss"\n[knowledge]\nfile = "knowledge/research.toml"\n[[agents]]\nid = "boss"\n'
        + rule
        + '[manager]\ndesks = ["research"]\nworkflows = []\nmode = "answer"\n'
    )
    path = desk_folder(tmp_path, "")
    path.write_text(text)
    call = await open_call(build_desk(load_desk_file(path)))
    (reply,) = await call.say("ask heat pumps")
    assert reply.startswith(f"Answer: Here is what I found. {HEAT_PUMPS}")
    assert [t.name for t in call.room.channels["boss"].extra_tools] == [  # type: ignore[attr-defined]
        "list_agents",
        "list_workflows",
        "delegate",
    ]
    assert await call.deliveries(after=2.0) == []
