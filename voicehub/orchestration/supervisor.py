"""Supervisor: an agent that talks to the user and delegates to workers in child rooms.

Modes:
- tool mode (default): with a `strategy`, one `delegate_workers` tool; without one, a
  `delegate_to_<id>` tool per worker. `wait_for_result=True` answers the tool with the
  results; otherwise the tool returns at once and results go to `hub.deliver`.
- `auto_delegate=True`: the framework runs the workers on every user message. With
  `refine_task` the supervisor first extracts the topic (pass 1), the workers run, and the
  supervisor presents the results (pass 2).
- `async_delivery=True` (voice): `delegate_workers` returns at once with task ids and a
  `delegation_message`; results go to `hub.deliver` with the desk's strategy.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import Event
from voicehub.delivery.policy import StrategyLike, parse_strategy
from voicehub.errors import ConfigError, ToolError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.delegation import TaskHandle, TaskResult
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime
from voicehub.orchestration.spoken_results import merge_answers
from voicehub.orchestration.task_tools import task_tools

if TYPE_CHECKING:
    from voicehub.core.room import Room

Strategy = Literal["sequential", "parallel"]

DEFAULT_REFINE = (
    "Extract the core topic of the user's latest request as a short phrase. "
    "Reply with the topic only."
)
DEFAULT_DELEGATION_MESSAGE = "I'm dispatching my team on that now. I'll tell you what they find."


class Supervisor(Orchestration):
    def __init__(
        self,
        supervisor: Agent,
        workers: Sequence[Agent],
        *,
        strategy: Strategy | None = None,
        auto_delegate: bool = False,
        async_delivery: bool = False,
        refine_task: bool = True,
        refine_instruction: str | None = None,
        delegation_message: str = DEFAULT_DELEGATION_MESSAGE,
        wait_for_result: bool = True,
        share_channels: Sequence[str] | None = None,
        task_timeout: float | None = None,
        delivery_strategy: StrategyLike | None = None,
    ) -> None:
        if not workers:
            raise ConfigError("Supervisor needs at least one worker")
        if strategy not in (None, "sequential", "parallel"):
            raise ConfigError(
                f"Supervisor strategy must be 'sequential', 'parallel' or None, not {strategy!r}"
            )
        ids = [w.id for w in workers]
        if len(set(ids)) != len(ids) or supervisor.id in ids:
            raise ConfigError(
                f"agent ids must be unique: supervisor {supervisor.id!r}, workers {ids}"
            )
        self.supervisor = supervisor
        self.workers = list(workers)
        self.strategy = strategy
        self.auto_delegate = auto_delegate
        self.async_delivery = async_delivery
        self.refine_task = refine_task
        self.refine_instruction = refine_instruction or DEFAULT_REFINE
        self.delegation_message = delegation_message
        self.wait_for_result = wait_for_result
        self.share_channels = list(share_channels or [])
        self.task_timeout = task_timeout
        self.delivery_strategy = delivery_strategy

    def agents(self) -> list[Agent]:
        return [self.supervisor, *self.workers]

    @property
    def in_background(self) -> bool:
        return self.async_delivery or not self.wait_for_result

    async def install(self, hub: OrchestrationRuntime, room_id: str) -> None:
        framework_driven = self.auto_delegate and not self.async_delivery
        channel = AgentChannel(
            self.supervisor,
            extra_tools=[] if framework_driven else self.tools(),
            responder=self._auto_respond if framework_driven else None,
        )
        await hub.room(room_id).attach(channel)

    # -- tools ---------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The delegation tools the supervisor gets (plus check/cancel in background mode)."""
        tools: list[Tool]
        if self.strategy is not None or self.async_delivery:
            tools = [self._delegate_workers_tool()]
        else:
            tools = [self._delegate_to_tool(worker) for worker in self.workers]
        if self.in_background:
            tools.extend(task_tools())
        return tools

    def _delegate_workers_tool(self) -> Tool:
        names = ", ".join(w.id for w in self.workers)

        async def delegate_workers(task: str, context: ToolContext) -> str:
            return await self._dispatch(context, self.workers, task)

        return Tool(
            delegate_workers,
            description=(
                f"Hand a slow job (research, lookups, drafting) to the workers ({names}). "
                "Give the task in one sentence."
            ),
        )

    def _delegate_to_tool(self, worker: Agent) -> Tool:
        async def delegate(task: str, context: ToolContext) -> str:
            return await self._dispatch(context, [worker], task)

        return Tool(
            delegate,
            name=f"delegate_to_{worker.id}",
            description=f"Delegate a task to {worker.id}: {worker.description}".strip(),
        )

    async def _dispatch(self, context: ToolContext, workers: list[Agent], task: str) -> str:
        hub = orchestration_runtime(context.hub, "delegation")
        if not task.strip():
            raise ToolError("task is empty: say what the workers should do")
        if not self.in_background:
            results = await self.run_workers(hub, context.room_id, task, workers)
            return combine(results)
        group = self._group(task, workers)
        first = await self._start(hub, context.room_id, task, workers, group)
        hub.jobs.start(
            self._finish_in_background(hub, context.room_id, task, workers, first, group),
            room_id=context.room_id,
        )
        return json.dumps(
            {
                "status": "dispatched",
                "task_ids": [h.task_id for h in first],
                "workers": [w.id for w in workers],
                "message": self.delegation_message,
            }
        )

    def _group(self, task: str, workers: list[Agent]) -> dict[str, Any]:
        """What each task of one background dispatch records, so that the instance taking
        the tasks over after this one is lost can finish and report the dispatch
        (`voicehub.orchestration.recovery`)."""
        return {
            "dispatch": {
                "id": f"dispatch-{os.urandom(6).hex()}",  # cheaper than uuid4, as unique here
                "task": task,
                "workers": [w.id for w in workers],
                "strategy": self.strategy or "parallel",
                "timeout": self.task_timeout,
                "delivery": (
                    parse_strategy(self.delivery_strategy).to_json()
                    if self.delivery_strategy is not None
                    else None
                ),
            }
        }

    async def _start(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        task: str,
        workers: list[Agent],
        group: dict[str, Any],
    ) -> list[TaskHandle]:
        """Start what can start now: all workers in parallel, or the first of a sequence."""
        starting = workers if self.strategy != "sequential" else workers[:1]
        return [await self._delegate(hub, room_id, worker, task, group) for worker in starting]

    async def _finish_in_background(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        task: str,
        workers: list[Agent],
        started: list[TaskHandle],
        group: dict[str, Any],
    ) -> None:
        results: list[TaskResult] = [await handle.result() for handle in started]
        if self.strategy == "sequential" and not any(r.taken_over for r in results):
            results += await self._sequence(hub, room_id, task, workers[1:], results, group)
        if any(r.taken_over for r in results):
            return  # another instance took this dispatch over and reports it
        await hub.deliver(
            room_id,
            combine(results),
            self.delivery_strategy,
            metadata={
                "kind": "supervisor",
                "task": task,
                "task_ids": [r.task_id for r in results],
                "statuses": [r.status.value for r in results],
            },
        )

    # -- running workers -----------------------------------------------------------------

    async def _delegate(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        worker: Agent,
        task: str,
        group: dict[str, Any] | None = None,
    ) -> TaskHandle:
        return await hub.delegate(
            worker,
            task,
            room_id,
            share_channels=self.share_channels,
            timeout=self.task_timeout,
            metadata=group,
        )

    async def run_workers(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        task: str,
        workers: Sequence[Agent] | None = None,
    ) -> list[TaskResult]:
        """Run workers on `task` (in parallel, or as a sequence where each sees the previous
        output) and return their results."""
        chosen = list(workers or self.workers)
        if self.strategy == "sequential":
            return await self._sequence(hub, room_id, task, chosen, [])
        handles = [await self._delegate(hub, room_id, w, task) for w in chosen]
        return list(await asyncio.gather(*(h.result() for h in handles)))

    async def _sequence(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        task: str,
        workers: Sequence[Agent],
        before: list[TaskResult],
        group: dict[str, Any] | None = None,
    ) -> list[TaskResult]:
        results: list[TaskResult] = []
        for worker in workers:
            previous = (before + results)[-1:] if (before or results) else []
            step_task = task
            if previous and previous[0].ok:
                step_task = (
                    f"{task}\n\nPrevious result from {previous[0].agent_id}:\n{previous[0].output}"
                )
            handle = await self._delegate(hub, room_id, worker, step_task, group)
            results.append(await handle.result())
            if results[-1].taken_over:
                break
        return results

    # -- framework-driven mode -----------------------------------------------------------

    async def _auto_respond(self, channel: AgentChannel, event: Event, room: Room) -> None:
        topic = event.text
        if self.refine_task:
            refined = await channel.run(
                room, await self._context(channel, room, self.refine_instruction)
            )
            topic = refined.text.strip() or event.text
        results = await self.run_workers(
            orchestration_runtime(room.hub, "auto_delegate"), room.id, topic
        )
        await channel.reply(
            room, instruction=f"Present these results to the user.\n\nResults:\n{combine(results)}"
        )

    @staticmethod
    async def _context(channel: AgentChannel, room: Room, instruction: str) -> list[ChatMessage]:
        messages = await channel.memory.messages(room.hub, room.id, channel.agent.id)
        messages.append(ChatMessage(role="system", content=instruction))
        return messages


def combine(results: Sequence[TaskResult]) -> str:
    """Worker results as one text to be spoken: the answers merged, each finding once
    (`voicehub.orchestration.spoken_results`), or why there is none. Answers are not
    prefixed with agent ids (a caller should not hear "analyst-a:"); a failure names the
    worker so the caller knows which part is missing."""
    return merge_answers([r.describe() for r in results], keep_whole=[not r.ok for r in results])
