"""Plan and execute, with the scripted LLM giving structured thoughts and analyses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.errors import ConfigError, ToolError
from voicehub.hub import Hub
from voicehub.orchestration.planner import (
    ANALYSIS_TOOL,
    THOUGHT_TOOL,
    ExecutionResult,
    PlanAndExecute,
    PlanStep,
    Thought,
)
from voicehub.orchestration.supervisor import Supervisor

GUARD = 5.0


def search(query: str) -> str:
    """Search the notes."""
    return f"results for {query}"


def fetch(url: str) -> str:
    """Fetch a page."""
    raise ToolError(f"404 for {url}")


TOOLS = [Tool(search), Tool(fetch)]


def step(tool: str, **parameters: str) -> dict[str, Any]:
    return {"tool_name": tool, "parameters": parameters, "description": f"{tool} it"}


def thought(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"reasoning": "Look it up.", "plan": list(steps), "criticism": "Fragile.", **extra}


def analysis(next_action: str) -> dict[str, Any]:
    return {"evaluation": f"so: {next_action}", "next_action": next_action, "reasoning": "ok"}


def instruction(pattern: str, **rule: Any) -> dict[str, Any]:
    return {"on": "instruction", "regex": pattern, **rule}


def thinker(plan: dict[str, Any], revised: dict[str, Any] | None = None) -> ScriptedLLM:
    """Plans `plan`, revises to `revised`, finishes after a success with nothing left, goes on
    after other successes, revises after failures, and answers with the last good result."""
    rules = [
        instruction("Make a plan", tool=THOUGHT_TOOL, arguments=plan),
        instruction(r"\) failed\.", tool=ANALYSIS_TOOL, arguments=analysis("revise_plan")),
        instruction(
            "Remaining steps: none", tool=ANALYSIS_TOOL, arguments=analysis("final_answer")
        ),
        instruction(
            "Result: results for enough", tool=ANALYSIS_TOOL, arguments=analysis("final_answer")
        ),
        instruction(r"\) succeeded\.", tool=ANALYSIS_TOOL, arguments=analysis("continue_plan")),
        instruction(r"stopped early: (?P<why>[^\n]+)", say="Gave up: {why}"),
        instruction(r"-> ok: (?P<result>[^\n]*)\n\nWrite the final answer", say="Final: {result}"),
    ]
    if revised is not None:
        rules.insert(0, instruction("Revise the plan", tool=THOUGHT_TOOL, arguments=revised))
    return ScriptedLLM(rules)


async def test_a_plan_runs_to_the_final_answer() -> None:
    planner = PlanAndExecute(
        thinker(thought(step("search", query="a"), step("search", query="b"))), TOOLS
    )
    result = await planner.run("find a and b")
    assert result == ExecutionResult(
        success=True,
        final_result="Final: results for b",
        execution_history=result.execution_history,
        total_steps=2,
        revisions=0,
    )
    first, second = result.execution_history
    assert first["tool_name"] == "search" and first["parameters"] == {"query": "a"}
    assert first["analysis"]["next_action"] == "continue_plan"
    assert second["analysis"]["next_action"] == "final_answer"


async def test_the_model_can_stop_the_plan_early_with_a_final_answer() -> None:
    plan = thought(step("search", query="enough"), step("fetch", url="never"))
    result = await PlanAndExecute(thinker(plan), TOOLS).run("quick")
    assert (result.success, result.total_steps, result.final_result) == (
        True,
        1,
        "Final: results for enough",
    )


async def test_a_failed_step_revises_the_plan() -> None:
    llm = thinker(thought(step("fetch", url="bad")), revised=thought(step("search", query="tides")))
    result = await PlanAndExecute(llm, TOOLS).run("tides")
    assert result.success
    assert result.revisions == 1
    assert result.final_result == "Final: results for tides"
    failed, recovered = result.execution_history
    assert failed["is_error"] and "404 for bad" in failed["result"]
    assert failed["analysis"]["next_action"] == "revise_plan"
    assert (recovered["tool_name"], recovered["is_error"]) == ("search", False)


async def test_the_revision_limit_stops_the_run() -> None:
    llm = thinker(thought(step("fetch", url="bad")), revised=thought(step("fetch", url="worse")))
    result = await PlanAndExecute(llm, TOOLS, max_revisions=1).run("tides")
    assert not result.success
    assert (result.revisions, result.total_steps) == (1, 2)
    assert (
        result.final_result == "Gave up: the revision limit (1) was reached. Say what is missing."
    )
    unlimited = await PlanAndExecute(llm, TOOLS, max_revisions=0).run("tides")
    assert (unlimited.revisions, unlimited.total_steps) == (0, 1)


async def test_clarification_unknown_tools_and_missing_structure() -> None:
    asks = thinker(thought(action="request_clarification", clarification_needed="Which coast?"))
    result = await PlanAndExecute(asks, TOOLS).run("tides")
    assert (result.success, result.final_result, result.total_steps) == (False, "Which coast?", 0)

    ghost = thinker(thought(step("teleport")), revised=thought(step("search", query="x")))
    recovered = await PlanAndExecute(ghost, TOOLS).run("go")
    assert (
        "unknown tool 'teleport'; available tools: fetch, search"
        in (recovered.execution_history[0]["result"])
    )
    assert recovered.success and recovered.revisions == 1

    silent = ScriptedLLM([], fallback="no idea")
    nothing = await PlanAndExecute(silent, TOOLS).run("go")
    assert (nothing.success, nothing.final_result) == (
        False,
        "I could not make a plan for this task.",
    )
    # Without analyses the loop carries on after successes and ends with the model's text.
    plan_only = ScriptedLLM(
        [
            instruction(
                "Make a plan", tool=THOUGHT_TOOL, arguments=thought(step("search", query="q"))
            )
        ],
        fallback="plain answer",
    )
    result = await PlanAndExecute(plan_only, TOOLS).execute(
        "go", Thought.model_validate(thought(step("search", query="q")))
    )
    assert (result.success, result.final_result, result.total_steps) == (True, "plain answer", 1)
    assert PlanStep(tool_name="x").parameters == {}
    with pytest.raises(ConfigError, match="max_steps >= 1"):
        PlanAndExecute(silent, TOOLS, max_steps=0)


# -- as a worker under a Supervisor ---------------------------------------------------------------


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


async def test_used_as_a_worker_under_a_supervisor(hub: Hub) -> None:
    llm = thinker(thought(step("fetch", url="bad")), revised=thought(step("search", query="tides")))
    worker = PlanAndExecute(llm, TOOLS).as_agent("planner", description="Plans and runs lookups.")
    coordinator = Agent(
        id="coordinator",
        llm=ScriptedLLM(
            [
                {
                    "regex": r"ask the planner about (?P<topic>.+)",
                    "tool": "delegate_to_planner",
                    "arguments": {"task": "{topic}"},
                    "reply": "Planner: {result}",
                }
            ]
        ),
    )
    room = await hub.create_room("call", orchestration=Supervisor(coordinator, [worker]))
    text = TextChannel("web")
    await room.attach(text)
    await asyncio.wait_for(text.send(room, "ask the planner about tides"), GUARD)
    assert [e.text for e in text.pending("call")] == ["Planner: Final: results for tides"]

    (task,) = await hub.store.list_tasks(parent_room_id="call")
    assert (task.agent_id, task.input, task.output) == (
        "planner",
        "tides",
        "Final: results for tides",
    )
    # hub.delegate directly: the worker's tool call carries the whole ExecutionResult.
    handle = await hub.delegate(worker, "tides", "call")
    done = await asyncio.wait_for(handle.result(), GUARD)
    assert done.output == "Final: results for tides"
    (call, outcome) = done.tool_calls[0]
    assert call.name == "plan_and_execute" and isinstance(outcome.data, ExecutionResult)
    assert outcome.data.revisions == 1
