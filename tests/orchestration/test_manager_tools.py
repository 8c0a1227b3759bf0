"""Manager tools: list_agents / list_workflows as pre-run tools, and delegate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.core.room import Room
from voicehub.hub import Hub
from voicehub.orchestration.delegation import INTERNAL_REASON
from voicehub.orchestration.directory import Directory, Workflow, WorkflowStep, WorkflowSummary
from voicehub.orchestration.manager_tools import (
    PRE_RUN_HEADER,
    PreRun,
    delegate_tool,
    list_agents_tool,
    list_workflows_tool,
    manager_tools,
)
from voicehub_dev.fakes.recording_llm import RecordingLLM

GUARD = 5.0


def talker(
    agent_id: str,
    says: str,
    *,
    description: str = "",
    keywords: tuple[str, ...] = (),
    when_to_use: str = "",
) -> Agent:
    llm = ScriptedLLM([{"match": ["*"], "say": says}])
    return Agent(
        id=agent_id,
        llm=llm,
        description=description,
        keywords=keywords,
        when_to_use=when_to_use,
    )


def directory() -> Directory:
    researcher = talker(
        "researcher",
        "Research on: {message}",
        description="Finds facts.",
        keywords=("research",),
        when_to_use="Facts are needed.",
    )
    writer = talker("writer", "Article from [{message}]", description="Writes articles.")
    brief = Workflow(
        summary=WorkflowSummary(
            name="market-brief", description="A brief.", goal="A checked brief"
        ),
        steps=(
            WorkflowStep(agent="researcher", task="{instruction}"),
            WorkflowStep(agent="writer", task="{goal}: {previous}"),
        ),
    )
    escalation = WorkflowSummary(name="support-escalation", goal="A support ticket")
    return Directory([(researcher, "desk.toml"), (writer, "desk.toml")], [brief, escalation])


def manager() -> RecordingLLM:
    return RecordingLLM(
        ScriptedLLM(
            [
                {
                    "regex": r"^research (?P<topic>.+)",
                    "tool": "delegate",
                    "arguments": {"kind": "agent", "name": "researcher", "instruction": "{topic}"},
                    "reply": "Done: {result}",
                },
                {
                    "regex": r"^ask (?P<name>\S+) about (?P<topic>.+)",
                    "tool": "delegate",
                    "arguments": {"kind": "agent", "name": "{name}", "instruction": "{topic}"},
                    "reply": "{result}",
                },
                {
                    "regex": r"^run (?P<name>\S+) for (?P<topic>.+)",
                    "tool": "delegate",
                    "arguments": {"kind": "workflow", "name": "{name}", "instruction": "{topic}"},
                    "reply": "{result}",
                },
            ],
            fallback="Who should do that?",
        )
    )


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


async def manager_room(
    hub: Hub, llm: RecordingLLM, found: Directory | None = None
) -> tuple[Room, TextChannel]:
    found = found or directory()
    agent = Agent(id="manager", instructions="You route requests.", llm=llm)
    tools = manager_tools(found)
    room = await hub.create_room("call", orchestration=None)
    text = TextChannel("web")
    await room.attach(text)
    pre_run = PreRun.for_agent(agent, tools)
    await room.attach(AgentChannel(agent, extra_tools=tools, prepare_step=pre_run.prepare_step))
    return room, text


async def say(room: Room, text: TextChannel, words: str) -> list[str]:
    await asyncio.wait_for(text.send(room, words), GUARD)
    return [e.text for e in text.pending(room.id)]


async def test_list_tools_return_json_arrays() -> None:
    found = directory()
    agents = json.loads((await list_agents_tool(found).invoke("{}")).content)
    assert agents[0] == {
        "name": "researcher",
        "description": "Finds facts.",
        "source": "desk.toml",
        "keywords": ["research"],
        "when_to_use": "Facts are needed.",
        "when_not_to_use": "",
    }
    assert [a["name"] for a in agents] == ["researcher", "writer"]
    flows = json.loads((await list_workflows_tool(found).invoke("{}")).content)
    assert [(f["name"], f["goal"], f["ephemeral"]) for f in flows] == [
        ("market-brief", "A checked brief", False),
        ("support-escalation", "A support ticket", False),
    ]


async def test_pre_run_results_are_in_the_first_model_call(hub: Hub) -> None:
    llm = manager()
    room, text = await manager_room(hub, llm)
    assert await say(room, text, "research ocean tides") == ["Done: Research on: ocean tides"]

    first = llm.calls[0]
    assert [m.role for m in first] == ["system", "system", "user"]
    injected = first[1].content
    assert injected.startswith(PRE_RUN_HEADER)
    agents_block = injected.split("list_agents:\n", 1)[1].split("\n\nlist_workflows:", 1)[0]
    assert [a["name"] for a in json.loads(agents_block)] == ["researcher", "writer"]
    assert '"market-brief"' in injected
    # The model did not spend a step calling them: the only tool it called is delegate.
    calls = [e.metadata["tool"] for e in await hub.history("call") if e.kind is EventKind.TOOL_CALL]
    assert calls == ["delegate"]
    # The results stay in context for the second step of the run.
    assert llm.calls[1][1] == first[1]


async def test_pre_run_tools_run_once_per_run() -> None:
    count = 0

    def list_agents() -> str:
        """Count."""
        nonlocal count
        count += 1
        return f"[{count}]"

    pre_run = PreRun([Tool(list_agents), Tool(lambda: "x", name="other")])
    history = [ChatMessage(role="user", content="hi")]
    first = await pre_run.prepare_step(1, history)
    second = await pre_run.prepare_step(2, history)
    assert count == 1 and first == second
    assert first[0].content == f"{PRE_RUN_HEADER}\n\nlist_agents:\n[1]\n\nother:\nx"
    assert first[1:] == history
    await pre_run.prepare_step(1, history)  # a new run runs them again
    assert count == 2
    # Only the designated tools are picked from an agent.
    agent = Agent(id="m", tools=(Tool(list_agents), Tool(lambda: "y", name="other")))
    assert [t.name for t in PreRun.for_agent(agent).tools] == ["list_agents"]


async def test_manager_pattern_end_to_end(hub: Hub) -> None:
    room, text = await manager_room(hub, manager())
    assert await say(room, text, "research ocean tides") == ["Done: Research on: ocean tides"]
    assert await say(room, text, "ask writer about whales") == ["Article from [whales]"]
    tasks = await hub.store.list_tasks(parent_room_id="call")
    assert [(t.agent_id, t.input, t.output) for t in tasks] == [
        ("researcher", "ocean tides", "Research on: ocean tides"),
        ("writer", "whales", "Article from [whales]"),
    ]
    assert list(hub.rooms) == ["call"]  # child rooms are closed
    assert await say(room, text, "hello") == ["Who should do that?"]


async def test_unknown_name_is_a_recoverable_error(hub: Hub) -> None:
    room, text = await manager_room(hub, manager())
    (reply,) = await say(room, text, "ask reserch about tides")
    assert reply == (
        "error in tool delegate: no agent named 'reserch'. Did you mean: researcher? "
        "Known agents: researcher, writer. Call delegate again with one of these names "
        "(see list_agents)."
    )
    (result,) = [e for e in await hub.history("call") if e.kind is EventKind.TOOL_RESULT]
    assert result.metadata["is_error"] is True
    # The model can pick again in the same conversation.
    assert await say(room, text, "ask researcher about tides") == ["Research on: tides"]


async def test_wrong_kind_and_empty_instruction_are_explained(hub: Hub) -> None:
    await hub.create_room("call", orchestration=None)
    tool = delegate_tool(directory())
    context = ToolContext(hub=hub, room_id="call", agent_id="manager")
    wrong = await tool.invoke(
        {"kind": "agent", "name": "market-brief", "instruction": "x"}, context
    )
    assert wrong.is_error
    assert "'market-brief' is a workflow, not an agent: call delegate with kind='workflow'" in (
        wrong.content
    )
    empty = await tool.invoke({"kind": "agent", "name": "writer", "instruction": " "}, context)
    assert empty.is_error and "instruction is empty" in empty.content
    bad_kind = await tool.invoke({"kind": "team", "name": "writer", "instruction": "x"}, context)
    assert bad_kind.is_error and "kind" in bad_kind.content
    flow = await tool.invoke({"kind": "workflow", "name": "brief", "instruction": "x"}, context)
    assert "no workflow named 'brief'. Did you mean: market-brief?" in flow.content


async def test_workflows_run_their_steps_or_are_announced(hub: Hub) -> None:
    room, text = await manager_room(hub, manager())
    (reply,) = await say(room, text, "run market-brief for solar panels")
    assert reply == (
        "Workflow 'market-brief' finished (goal: A checked brief).\n"
        "1. researcher: Research on: solar panels\n"
        "2. writer: Article from [A checked brief: Research on: solar panels]"
    )
    (reply,) = await say(room, text, "run support-escalation for a broken meter")
    assert reply == (
        "Started workflow 'support-escalation' with goal: A support ticket\n"
        "Instruction: a broken meter"
    )
    started = [e.metadata for e in await hub.history("call") if e.kind is EventKind.TASK]
    assert [m["workflow"] for m in started] == ["market-brief", "support-escalation"]
    assert started[1]["task"] == "a broken meter"


async def test_listed_agents_without_a_model_run_as_the_hub_registered_agent(hub: Hub) -> None:
    listed = Directory([(Agent(id="researcher"), "desk.toml"), (Agent(id="ghost"), "desk.toml")])
    hub.register_agent(talker("researcher", "Hub researcher on {message}"))
    room, text = await manager_room(hub, manager(), listed)
    assert await say(room, text, "ask researcher about tides") == ["Hub researcher on tides"]
    (reply,) = await say(room, text, "ask ghost about tides")
    assert reply == f"error in tool delegate: ghost failed: {INTERNAL_REASON}"
