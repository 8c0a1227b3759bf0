"""Loop orchestration: produce, review with structured verdicts, revise."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.core.store.base import TaskStatus
from voicehub.delivery.injector import AlwaysIdle, TextInjector
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.delegation import TaskResult
from voicehub.orchestration.loop import VERDICT_TOOL, Loop, Verdict, verdict_of

GUARD = 5.0


def producer() -> Agent:
    llm = ScriptedLLM(
        [
            {"match": ["Reviewer feedback"], "say": "Revised draft"},
            {"match": ["*"], "say": "First draft"},
        ]
    )
    return Agent(id="writer", llm=llm)


def verdict(approved: bool, feedback: str = "") -> dict[str, object]:
    return {"approved": approved, "feedback": feedback}


def reviewer(agent_id: str, *, first: str | None, revised: str | None) -> Agent:
    """A reviewer that rejects the first draft with `first` feedback (None: approves it)
    and the revised draft with `revised` feedback (None: approves it)."""

    def rule(draft: str, feedback: str | None) -> dict[str, object]:
        return {
            "match": [draft],
            "tool": VERDICT_TOOL,
            "arguments": verdict(feedback is None, feedback or ""),
        }

    llm = ScriptedLLM([rule("Revised draft", revised), rule("First draft", first)])
    return Agent(id=agent_id, llm=llm)


def talker(agent_id: str, says: str) -> Agent:
    return Agent(id=agent_id, llm=ScriptedLLM([{"match": ["*"], "say": says}]))


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    await hub.create_room("call", orchestration=None)
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


async def agents_in_order(hub: Hub) -> list[str]:
    tasks = await hub.store.list_tasks(parent_room_id="call")
    return [t.agent_id for t in tasks]


async def test_approves_on_iteration_two(hub: Hub) -> None:
    loop = Loop(producer(), reviewer=reviewer("editor", first="Add a kigo.", revised=None))
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)

    assert result.approved is True
    assert result.iteration == 2
    assert result.output == "Revised draft"
    assert result.feedback == ["Add a kigo."]
    assert [[r.verdict.approved for r in round_] for round_ in result.reviews] == [[False], [True]]
    assert await agents_in_order(hub) == ["writer", "editor", "writer", "editor"]
    # The producer saw the feedback when revising.
    revise = await hub.store.get_task("call::task-3")
    assert revise is not None
    assert "First draft" in revise.input
    assert "- editor: Add a kigo." in revise.input


async def test_never_approves(hub: Hub) -> None:
    loop = Loop(
        producer(),
        reviewer=reviewer("editor", first="No.", revised="Still no."),
        max_iterations=4,
    )
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert result.approved is False
    assert result.iteration == 4
    assert result.output == "Revised draft"
    assert len(result.reviews) == 4
    assert result.feedback == ["No.", "Still no.", "Still no.", "Still no."]


@pytest.mark.parametrize("words", ["APPROVED", "NOT APPROVED", "Approved! Looks great."])
async def test_plain_text_is_not_approval(hub: Hub, words: str) -> None:
    loop = Loop(producer(), reviewer=talker("editor", words), max_iterations=2)
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert result.approved is False
    assert result.iteration == 2
    (review,) = result.reviews[0]
    assert not review.verdict.approved
    assert review.verdict.feedback == f"no structured verdict from editor; it said: {words}"


async def test_an_exact_json_verdict_counts(hub: Hub) -> None:
    loop = Loop(producer(), reviewer=talker("editor", json.dumps(verdict(True))))
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert (result.approved, result.iteration) == (True, 1)


def _result(output: str = "", status: TaskStatus = TaskStatus.OK) -> TaskResult:
    return TaskResult("t", "editor", "call", status, output=output, reason="boom")


def test_verdict_of() -> None:
    assert verdict_of(_result('{"approved": true, "feedback": "ok"}')) == Verdict(
        approved=True, feedback="ok"
    )
    assert not verdict_of(_result("true")).approved
    assert not verdict_of(_result('{"approved": "maybe?"}')).approved
    failed = verdict_of(_result(status=TaskStatus.FAILED))
    assert not failed.approved
    assert failed.feedback == "review failed: editor failed: boom"


async def test_parallel_reviewers_combine_feedback(hub: Hub) -> None:
    loop = Loop(
        producer(),
        [
            reviewer("style", first="Shorter lines.", revised=None),
            reviewer("facts", first="Check the season.", revised=None),
        ],
        strategy="parallel",
    )
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert (result.approved, result.iteration) == (True, 2)
    assert [[r.reviewer_id for r in round_] for round_ in result.reviews] == [
        ["style", "facts"],
        ["style", "facts"],
    ]
    revise = await hub.store.get_task("call::task-4")
    assert revise is not None
    assert revise.agent_id == "writer"
    assert "- style: Shorter lines.\n- facts: Check the season." in revise.input


async def test_parallel_needs_every_reviewer(hub: Hub) -> None:
    loop = Loop(
        producer(),
        [
            reviewer("easy", first=None, revised=None),
            reviewer("hard", first="No.", revised="No."),
        ],
        strategy="parallel",
        max_iterations=2,
    )
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert (result.approved, result.iteration) == (False, 2)
    assert result.feedback == ["No.", "No."]


async def test_sequential_stops_at_the_first_rejection(hub: Hub) -> None:
    loop = Loop(
        producer(),
        [
            reviewer("strict", first="Too long.", revised=None),
            reviewer("lenient", first=None, revised=None),
        ],
    )
    assert loop.strategy == "sequential"
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert (result.approved, result.iteration) == (True, 2)
    assert [[r.reviewer_id for r in round_] for round_ in result.reviews] == [
        ["strict"],
        ["strict", "lenient"],
    ]
    assert await agents_in_order(hub) == ["writer", "strict", "writer", "strict", "lenient"]


async def test_a_producer_failure_is_feedback_not_a_crash(hub: Hub) -> None:
    loop = Loop(
        Agent(id="writer"), reviewer=reviewer("editor", first=None, revised=None), max_iterations=2
    )
    result = await asyncio.wait_for(loop.run(hub, "call", "Write a haiku"), GUARD)
    assert (result.approved, result.iteration, result.output) == (False, 2, "")
    assert "the draft could not be produced: writer failed" in result.feedback[0]
    assert await agents_in_order(hub) == ["writer", "writer"]


async def test_reviewers_get_the_verdict_tool() -> None:
    loop = Loop(producer(), reviewer=talker("editor", "hm"))
    (editor,) = loop.reviewers
    assert editor.tool(VERDICT_TOOL) is not None
    spec = editor.tool(VERDICT_TOOL)
    assert spec is not None
    assert spec.spec.parameters["required"] == ["approved"]
    assert [a.id for a in loop.agents()] == ["writer", "editor"]


async def test_loop_in_a_text_room_answers_with_the_final_draft() -> None:
    hub = Hub()
    loop = Loop(producer(), reviewer=reviewer("editor", first="Again.", revised=None))
    room = await hub.create_room("desk", orchestration=loop)
    text = TextChannel("web")
    await room.attach(text)
    await text.send(room, "Write a haiku")
    (reply,) = text.pending(room.id)
    assert reply.text == "Revised draft"
    assert (reply.source, reply.metadata) == ("writer", {"approved": True, "iteration": 2})
    await asyncio.wait_for(hub.aclose(), GUARD)


async def test_delegate_loop_delivers_the_result_with_its_status() -> None:
    clock = VirtualClock()
    hub = Hub(clock=clock)
    front = Agent(
        id="front",
        llm=ScriptedLLM(
            [
                {
                    "regex": r"write (?P<what>.+)",
                    "tool": "delegate_loop",
                    "arguments": {"task": "{what}"},
                    "reply": "{result.message}",
                }
            ]
        ),
    )
    loop = Loop(
        producer(),
        reviewer=reviewer("editor", first="Again.", revised=None),
        async_delivery=True,
        front=front,
        delegation_message="Drafting now.",
    )
    assert [t.name for t in loop.tools()] == ["delegate_loop", "check_tasks", "cancel_task"]
    room = await hub.create_room("call", orchestration=loop)
    text = TextChannel("web")
    await room.attach(text)
    await hub.delivery.attach(room.id, TextInjector(hub, room.id), AlwaysIdle(clock))

    await text.send(room, "write a haiku about rain")
    assert [e.text for e in text.pending(room.id)] == ["Drafting now."]
    await asyncio.wait_for(hub.wait_idle(), GUARD)
    await clock.advance(1.0)  # the default WaitForIdle buffer

    (delivered,) = text.pending(room.id)
    assert delivered.kind is EventKind.DELIVERY
    assert delivered.text == "Revised draft"
    assert delivered.metadata["kind"] == "loop"
    assert delivered.metadata["task"] == "a haiku about rain"
    assert delivered.metadata["approved"] is True
    assert delivered.metadata["iteration"] == 2
    await asyncio.wait_for(hub.aclose(), GUARD)


def test_loop_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="at least one reviewer"):
        Loop(producer())
    with pytest.raises(ConfigError, match="max_iterations"):
        Loop(producer(), reviewer=talker("r", "x"), max_iterations=0)
    with pytest.raises(ConfigError, match="strategy"):
        Loop(producer(), reviewer=talker("r", "x"), strategy="vote")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs `front`"):
        Loop(producer(), reviewer=talker("r", "x"), async_delivery=True)
