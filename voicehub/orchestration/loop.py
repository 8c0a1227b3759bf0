"""Loop: a producer revised by reviewers until they all approve or `max_iterations` pass.

Reviewers give a structured verdict through the `submit_verdict` tool (or, for models with
structured output, an answer that is exactly a JSON verdict object). Free text never counts as
approval: "NOT APPROVED" is a rejection like any other text without a verdict.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ValidationError

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import Event
from voicehub.delivery.policy import StrategyLike
from voicehub.errors import ConfigError, ToolError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.delegation import TaskResult
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime
from voicehub.orchestration.spoken_results import without_draft_label
from voicehub.orchestration.task_tools import task_tools

if TYPE_CHECKING:
    from voicehub.core.room import Room

VERDICT_TOOL = "submit_verdict"


class Verdict(BaseModel):
    """A reviewer's decision."""

    approved: bool
    feedback: str = ""


def submit_verdict(approved: bool, feedback: str = "") -> Verdict:
    """Give your verdict on the draft: approved=true to accept it, or approved=false with
    the feedback the writer must address."""
    return Verdict(approved=approved, feedback=feedback)


@dataclass(frozen=True)
class Review:
    reviewer_id: str
    verdict: Verdict


@dataclass
class LoopResult:
    """The final draft, whether every reviewer approved it, and after how many iterations."""

    output: str
    approved: bool
    iteration: int
    reviews: list[list[Review]] = field(default_factory=list)

    @property
    def feedback(self) -> list[str]:
        return [
            r.verdict.feedback for round_ in self.reviews for r in round_ if not r.verdict.approved
        ]


class Loop(Orchestration):
    """`agent` produces, `reviewers` review (sequentially: the first rejection ends the
    round; in parallel: all review and their feedback is combined)."""

    def __init__(
        self,
        agent: Agent,
        reviewers: Sequence[Agent] | None = None,
        *,
        reviewer: Agent | None = None,
        max_iterations: int = 3,
        strategy: Literal["sequential", "parallel"] | None = None,
        async_delivery: bool = False,
        front: Agent | None = None,
        task_timeout: float | None = None,
        delivery_strategy: StrategyLike | None = None,
        delegation_message: str = "I've started on that draft; I'll read it to you once "
        "it has been reviewed.",
    ) -> None:
        chosen = list(reviewers or []) + ([reviewer] if reviewer is not None else [])
        if not chosen:
            raise ConfigError("Loop needs at least one reviewer (reviewers=[...] or reviewer=)")
        if max_iterations < 1:
            raise ConfigError(f"max_iterations must be at least 1, got {max_iterations}")
        if strategy not in (None, "sequential", "parallel"):
            raise ConfigError(
                f"Loop strategy must be 'sequential', 'parallel' or None, not {strategy!r}"
            )
        if async_delivery and front is None:
            raise ConfigError(
                "Loop(async_delivery=True) needs `front`: the agent that talks "
                "to the caller and gets the delegate_loop tool"
            )
        self.producer = agent
        self.reviewers = [
            r if r.tool(VERDICT_TOOL) else r.with_tools(Tool(submit_verdict)) for r in chosen
        ]
        self.max_iterations = max_iterations
        self.strategy = strategy or "sequential"
        self.async_delivery = async_delivery
        self.front = front
        self.task_timeout = task_timeout
        self.delivery_strategy = delivery_strategy
        self.delegation_message = delegation_message

    def agents(self) -> list[Agent]:
        return [*([self.front] if self.front else []), self.producer, *self.reviewers]

    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        room = hub.room(room_id)
        if self.async_delivery and self.front is not None:
            await room.attach(AgentChannel(self.front, extra_tools=self.tools()))
        else:
            speaker = self.front or self.producer
            await room.attach(AgentChannel(speaker, responder=self._respond))

    def tools(self) -> list[Tool]:
        """`delegate_loop` (returns at once; the result goes to `hub.deliver`) and the
        check/cancel tools."""

        async def delegate_loop(task: str, context: ToolContext) -> str:
            hub = orchestration_runtime(context.hub, "delegate_loop")
            if not task.strip():
                raise ToolError("task is empty: say what should be drafted")
            hub.jobs.start(
                self._run_and_deliver(hub, context.room_id, task), room_id=context.room_id
            )
            return json.dumps(
                {
                    "status": "dispatched",
                    "producer": self.producer.id,
                    "reviewers": [r.id for r in self.reviewers],
                    "message": self.delegation_message,
                }
            )

        description = (
            f"Have {self.producer.id} draft something and revise it until "
            f"{', '.join(r.id for r in self.reviewers)} approve."
        )
        return [Tool(delegate_loop, description=description), *task_tools()]

    async def _run_and_deliver(self, hub: OrchestrationRuntime, room_id: str, task: str) -> None:
        result = await self.run(hub, room_id, task)
        await hub.deliver(
            room_id,
            result.output,
            self.delivery_strategy,
            metadata={
                "kind": "loop",
                "task": task,
                "approved": result.approved,
                "iteration": result.iteration,
            },
        )

    async def _respond(self, channel: AgentChannel, event: Event, room: Room) -> None:
        result = await self.run(orchestration_runtime(room.hub, "loop"), room.id, event.text)
        await channel.say(room, result.output, approved=result.approved, iteration=result.iteration)

    # -- the loop ------------------------------------------------------------------------

    async def run(self, hub: OrchestrationRuntime, room_id: str, task: str) -> LoopResult:
        """Produce, review, revise; every step runs in its own child room."""
        draft = ""
        rounds: list[list[Review]] = []
        for iteration in range(1, self.max_iterations + 1):
            prompt = task if iteration == 1 else _revision_prompt(task, draft, rounds[-1])
            produced = await self._delegate(hub, room_id, self.producer, prompt)
            if not produced.ok:
                rounds.append(
                    [
                        Review(
                            self.producer.id,
                            Verdict(
                                approved=False,
                                feedback=f"the draft could not be produced: {produced.describe()}",
                            ),
                        )
                    ]
                )
                continue
            draft = without_draft_label(produced.output)  # it is spoken once approved
            reviews = await self._review(hub, room_id, task, draft, iteration)
            rounds.append(reviews)
            if all(r.verdict.approved for r in reviews):
                return LoopResult(draft, True, iteration, rounds)
        return LoopResult(draft, False, self.max_iterations, rounds)

    async def _review(
        self, hub: OrchestrationRuntime, room_id: str, task: str, draft: str, iteration: int
    ) -> list[Review]:
        # Reviewers learn the round from the prompt, so a writer never needs to mark its
        # draft for them (a marker would be read to the caller with the draft).
        which = "this draft" if iteration == 1 else f"this revised draft (round {iteration})"
        prompt = (
            f"Review {which} for the task: {task}\n\nDraft:\n{draft}\n\n"
            f"Call {VERDICT_TOOL} with approved=true, or approved=false and feedback."
        )
        if self.strategy == "parallel":
            results = await asyncio.gather(
                *(self._delegate(hub, room_id, r, prompt, verdict=True) for r in self.reviewers)
            )
            return [Review(r.agent_id, verdict_of(r)) for r in results]
        reviews: list[Review] = []
        for reviewer in self.reviewers:
            result = await self._delegate(hub, room_id, reviewer, prompt, verdict=True)
            reviews.append(Review(reviewer.id, verdict_of(result)))
            if not reviews[-1].verdict.approved:
                break
        return reviews

    async def _delegate(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        agent: Agent,
        task: str,
        *,
        verdict: bool = False,
    ) -> TaskResult:
        handle = await hub.delegate(
            agent,
            task,
            room_id,
            timeout=self.task_timeout,
            stop_tools=(VERDICT_TOOL,) if verdict else (),
        )
        return await handle.result()


def verdict_of(result: TaskResult) -> Verdict:
    """The reviewer's structured verdict: its last successful `submit_verdict` call, or an
    answer that is exactly a JSON verdict. Anything else is a rejection."""
    if not result.ok:
        return Verdict(approved=False, feedback=f"review failed: {result.describe()}")
    for call, outcome in reversed(result.tool_calls):
        if call.name == VERDICT_TOOL and isinstance(outcome.data, Verdict):
            return outcome.data
    try:
        return Verdict.model_validate(json.loads(result.output))
    except (json.JSONDecodeError, ValidationError, TypeError):
        return Verdict(
            approved=False,
            feedback=f"no structured verdict from {result.agent_id}; "
            f"it said: {result.output[:200]}",
        )


def _revision_prompt(task: str, draft: str, reviews: list[Review]) -> str:
    feedback = "\n".join(
        f"- {r.reviewer_id}: {r.verdict.feedback or 'not approved'}"
        for r in reviews
        if not r.verdict.approved
    )
    return (
        f"{task}\n\nYour previous draft:\n{draft}\n\nReviewer feedback to address:\n"
        f"{feedback}\n\nWrite a revised draft."
    )
