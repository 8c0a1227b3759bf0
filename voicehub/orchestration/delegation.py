"""Delegation: run an agent on a task in a child room, in the background.

`hub.delegate(...)` returns a `TaskHandle` at once. The work waits for a slot (a hub-wide and
a per-room limit, queued in order), runs in child room `<parent>::task-<n>` with an optional
timeout on the hub clock, and ends with a structured `TaskResult`: ok, failed (with a reason),
timed_out or cancelled. A worker's exception is logged in full and becomes a failed result
whose reason is written for the caller (`caller_reason`): a result is spoken, and an exception's
text names hosts, ports, files and class names a caller must never hear; `detail` keeps the
exception for code and spans. A store unavailable for a while (a Redis restart) does not
fail the work: the child room's opening, its events (`Room.post`) and the task record are
retried. The finished child room is archived in the store and dropped from memory, and so is
the handle, so memory stays bounded.

Each task record names its `owner` (this instance) and every write after the first is a
compare-and-set on its fence: when a surviving instance has taken the task over (this one's
heartbeat lapsed, `voicehub.orchestration.instances`), the late result here is not stored and
comes back `taken_over`, so it is not delivered twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.llm import ChatMessage, ToolCall
from voicehub.agents.tools import ToolResult
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import HookTrigger
from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import TaskRecord, TaskStatus
from voicehub.core.store.outage import STORE_OUTAGE_SECONDS, retry_unavailable
from voicehub.core.tracing import TRACE_KEY, Span
from voicehub.core.trusted import replace
from voicehub.errors import StoreError, StoreUnavailableError, VoicehubError
from voicehub.orchestration.admission import Admission

if TYPE_CHECKING:
    from voicehub.core.room import Room
    from voicehub.orchestration.runtime import OrchestrationRuntime

log = logging.getLogger("voicehub.delegation")

STORE_REASON = "the conversation store could not be reached"
INTERNAL_REASON = "something went wrong on our side"


@dataclass(frozen=True)
class TaskResult:
    """How delegated work ended. `output` is the worker's answer when `status` is ok.
    `taken_over`: another instance took the task over meanwhile; this result was not stored
    and must not be delivered (the other instance reports the task). `reason` may be spoken
    to the caller; `detail` (the exception a failure came from) is for code and operators,
    never spoken."""

    task_id: str
    agent_id: str
    parent_room_id: str
    status: TaskStatus
    output: str = ""
    reason: str = ""
    tool_calls: tuple[tuple[ToolCall, ToolResult], ...] = ()
    taken_over: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status is TaskStatus.OK

    def describe(self) -> str:
        """One line for a model or a person: the answer, or why there is none."""
        if self.ok:
            return self.output
        return f"{self.agent_id} {self.status.value.replace('_', ' ')}: {self.reason}"


@dataclass(eq=False)
class TaskHandle:
    """A running (or queued) task. Await `result()`; `cancel()` stops it."""

    task_id: str
    agent_id: str
    parent_room_id: str
    input: str
    status: TaskStatus = TaskStatus.QUEUED
    _future: asyncio.Future[TaskResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future(), repr=False
    )
    _runner: asyncio.Task[None] | None = field(default=None, repr=False)
    span: Span | None = field(default=None, repr=False)  # with tracing on

    @property
    def child_room_id(self) -> str:
        return self.task_id

    def done(self) -> bool:
        return self._future.done()

    async def result(self) -> TaskResult:
        """Wait for the result (waiting can itself be cancelled without cancelling the task)."""
        return await asyncio.shield(self._future)

    def cancel(self) -> bool:
        """Cancel the task; returns False if it had already finished."""
        if self._future.done() or self._runner is None:
            return False
        self._runner.cancel()
        return True

    def __await__(self):  # type: ignore[no-untyped-def]
        return self.result().__await__()


class Delegation:
    """The hub's task manager."""

    def __init__(
        self,
        hub: OrchestrationRuntime,
        *,
        max_concurrent: int,
        max_per_room: int,
        default_timeout: float | None,
        owner: str = "",
    ) -> None:
        if max_concurrent < 1 or max_per_room < 1:
            raise VoicehubError("task concurrency limits must be at least 1")
        self.hub = hub
        self.owner = owner  # the instance id written on each task record
        self.max_per_room = max_per_room
        self.default_timeout = default_timeout
        self._admission = Admission(max_concurrent, max_per_room)
        self._holding: set[str] = set()  # ids of tasks that hold a running slot
        self._counters: dict[str, int] = {}
        self._live: dict[str, TaskHandle] = {}
        # The live tasks of each parent room: closing a room (each child room when its task
        # ends) looks its tasks up without scanning every live task of the hub.
        self._live_by_room: dict[str, dict[str, TaskHandle]] = {}
        self._finishing = TaskSet("delegation: tasks cancelled before they started")

    @property
    def live(self) -> dict[str, TaskHandle]:
        """Tasks queued or running now."""
        return self._live

    def get(self, task_id: str) -> TaskHandle | None:
        return self._live.get(task_id)

    def of_room(self, parent_room_id: str) -> list[TaskHandle]:
        room = self._live_by_room.get(parent_room_id)
        return list(room.values()) if room else []

    async def delegate(
        self,
        agent: Agent,
        task: str,
        parent_room_id: str,
        *,
        share_channels: Sequence[str] | None = None,
        timeout: float | None = None,
        metadata: dict[str, Any] | None = None,
        stop_tools: Sequence[str] = (),
    ) -> TaskHandle:
        parent = self.hub.room(parent_room_id)
        shared = []
        for channel_id in share_channels or ():
            channel = parent.channels.get(channel_id)
            if channel is None:
                known = ", ".join(sorted(parent.channels)) or "none"
                raise VoicehubError(
                    f"cannot share channel {channel_id!r} with a worker: room "
                    f"{parent_room_id!r} has no such channel (it has: {known})"
                )
            shared.append(channel)
        number = self._counters.get(parent_room_id)
        if number is None:
            counted = await self.hub.store.count_tasks(parent_room_id)
            # Another delegation may have counted (and numbered) while this one waited.
            number = self._counters.get(parent_room_id, counted)
        number += 1
        self._counters[parent_room_id] = number
        handle = TaskHandle(f"{parent_room_id}::task-{number}", agent.id, parent_room_id, task)
        self._live[handle.task_id] = handle
        self._live_by_room.setdefault(parent_room_id, {})[handle.task_id] = handle
        # When a slot is free the task is stored as running at once: one write, not two.
        free = self._admission.try_take(parent_room_id)
        if free:
            self._holding.add(handle.task_id)
        record = TaskRecord(
            id=handle.task_id,
            parent_room_id=parent_room_id,
            child_room_id=handle.task_id,
            agent_id=agent.id,
            input=task,
            status=TaskStatus.RUNNING if free else TaskStatus.QUEUED,
            metadata=dict(metadata or {}),
            owner=self.owner,
        )
        if self.hub.tracer.enabled:
            self._trace(handle, record)
        await self.hub.store.save_task(record)
        if self.hub.hooks.has(HookTrigger.ON_TASK_DELEGATED, parent_room_id):
            await self.hub.run_hooks(
                HookTrigger.ON_TASK_DELEGATED, _task_event(parent_room_id, handle, task)
            )
        limit = timeout if timeout is not None else self.default_timeout
        handle._runner = asyncio.create_task(
            self._run(handle, agent, record, shared, limit, tuple(stop_tools))
        )
        handle._runner.add_done_callback(lambda _: self._runner_done(handle, record))
        return handle

    def _trace(self, handle: TaskHandle, record: TaskRecord) -> None:
        """The task's span, under the work that delegated it (or the trace its metadata
        names: a task run again after its instance was lost); the record keeps it."""
        handle.span = span = self.hub.tracer.start(
            f"task {handle.agent_id}",
            room_id=handle.parent_room_id,
            parent=record.metadata.get(TRACE_KEY),
            attributes={
                "voicehub.task.id": handle.task_id,
                "voicehub.agent.id": handle.agent_id,
                "voicehub.room.id": handle.parent_room_id,
                "voicehub.child_room.id": handle.task_id,
                "voicehub.task.input": handle.input[:1000],
            },
        )
        record.metadata[TRACE_KEY] = span.carrier()

    def _runner_done(self, handle: TaskHandle, record: TaskRecord) -> None:
        """A runner cancelled before its first step never enters `_run` (so none of its
        handlers ran): finish the task as cancelled here, or its waiters would hang."""
        if handle._future.done():
            return
        result = TaskResult(
            handle.task_id,
            handle.agent_id,
            handle.parent_room_id,
            TaskStatus.CANCELLED,
            reason="cancelled before it started",
        )
        self._finishing.start(self._finish(handle, record, result), name=handle.task_id)

    async def _run(
        self,
        handle: TaskHandle,
        agent: Agent,
        record: TaskRecord,
        shared: list[Any],
        timeout: float | None,
        stop_tools: tuple[str, ...],
    ) -> None:
        result: TaskResult
        try:
            if handle.task_id not in self._holding:
                await self._admission.take(handle.parent_room_id)
                self._holding.add(handle.task_id)
                record = await self._swap(record, status=TaskStatus.RUNNING) or record
            handle.status = TaskStatus.RUNNING
            if handle.span is None:
                result = await self._work_with_timeout(handle, agent, shared, timeout, stop_tools)
            else:
                with handle.span.activate():  # the worker's tool calls are its children
                    work = self._work_with_timeout(handle, agent, shared, timeout, stop_tools)
                    result = await work
        except asyncio.CancelledError:
            result = TaskResult(
                handle.task_id,
                agent.id,
                handle.parent_room_id,
                TaskStatus.CANCELLED,
                reason="cancelled before it finished",
            )
        except Exception as exc:  # the worker's fault must never crash the hub
            log.exception("task %s (%s) failed", handle.task_id, agent.id)
            result = TaskResult(
                handle.task_id,
                agent.id,
                handle.parent_room_id,
                TaskStatus.FAILED,
                reason=caller_reason(exc),
                detail=f"{type(exc).__name__}: {exc}",
            )
        await self._finish(handle, record, result)

    async def _work_with_timeout(
        self,
        handle: TaskHandle,
        agent: Agent,
        shared: list[Any],
        timeout: float | None,
        stop_tools: tuple[str, ...],
    ) -> TaskResult:
        if timeout is None:
            return await self._work(handle, agent, shared, stop_tools)
        work = asyncio.create_task(self._work(handle, agent, shared, stop_tools))
        watchdog = asyncio.create_task(self.hub.clock.sleep(timeout))
        try:
            await asyncio.wait({work, watchdog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watchdog.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled():
            return TaskResult(
                handle.task_id,
                agent.id,
                handle.parent_room_id,
                TaskStatus.TIMED_OUT,
                reason=f"no result within {timeout:g} s",
            )
        return work.result()

    async def _work(
        self, handle: TaskHandle, agent: Agent, shared: list[Any], stop_tools: tuple[str, ...]
    ) -> TaskResult:
        hub = self.hub

        async def open_child() -> Room:
            return await hub.create_child_room(
                handle.parent_room_id,
                handle.task_id,
                metadata={"task_id": handle.task_id, "agent_id": agent.id},
            )

        try:
            child = await open_child()
        except StoreUnavailableError as exc:  # a passing outage: the room is an upsert
            child = await retry_unavailable(
                hub.clock, open_child, exc, what=f"task {handle.task_id}: its room",
                limit=STORE_OUTAGE_SECONDS,
            )  # fmt: skip
        try:
            for channel in shared:
                await child.attach(channel)
            await child.post(
                Event(
                    kind=EventKind.MESSAGE,
                    text=handle.input,
                    source=handle.parent_room_id,
                    role="user",
                    source_type=ChannelType.SYSTEM,
                )
            )
            worker = AgentChannel(agent)
            run = await worker.run(
                child, [ChatMessage(role="user", content=handle.input)], stop_tools=stop_tools
            )
            if run.text:
                await worker.say(child, run.text)
            return TaskResult(
                handle.task_id,
                agent.id,
                handle.parent_room_id,
                TaskStatus.OK,
                output=run.text,
                tool_calls=tuple(run.tool_calls),
            )
        finally:
            await hub.close_room(child.id)

    async def _finish(self, handle: TaskHandle, record: TaskRecord, result: TaskResult) -> None:
        handle.status = result.status
        self._live.pop(handle.task_id, None)
        room = self._live_by_room.get(handle.parent_room_id)
        if room is not None:
            room.pop(handle.task_id, None)
            if not room:
                del self._live_by_room[handle.parent_room_id]
        if handle.task_id in self._holding:
            self._holding.discard(handle.task_id)
            self._admission.release(handle.parent_room_id)
        try:
            try:
                final = await self._swap(
                    record,
                    status=result.status,
                    output=result.output,
                    reason=result.reason,
                    finished_at=time.time(),
                )
            except StoreError:  # the result is still worth delivering (that is retried too)
                log.exception(
                    "task %s: its %s result could not be stored",
                    handle.task_id,
                    result.status.value,
                )
                final = record
            if final is None:
                result = dataclasses.replace(result, taken_over=True)
            # the event is built only when a hook will see it (none for a task taken over:
            # the instance that took it reports it)
            if not result.taken_over and self.hub.hooks.has(
                HookTrigger.ON_TASK_COMPLETED, handle.parent_room_id
            ):
                event = _task_event(
                    handle.parent_room_id, handle, result.describe(), status=result.status.value
                )
                await self.hub.run_hooks(HookTrigger.ON_TASK_COMPLETED, event)
        finally:
            if handle.span is not None:
                handle.span.set_attribute("voicehub.task.status", result.status.value)
                handle.span.end(None if result.ok else result.detail or result.describe())
            if not handle._future.done():
                handle._future.set_result(result)

    async def _swap(self, record: TaskRecord, **changes: Any) -> TaskRecord | None:
        """Write `record` with `changes` if nobody changed it since; None (logged) when
        another instance took the task over. A store away for a while is waited for."""
        written = replace(record, fence=record.fence + 1, **changes)
        store = self.hub.store
        try:
            swapped = await store.swap_task(written, expected_fence=record.fence)
        except StoreUnavailableError as exc:

            async def again() -> bool:
                if await store.swap_task(written, expected_fence=record.fence):
                    return True
                # Refused: by a takeover, or by our own earlier try that landed but whose
                # answer was lost (then the stored record is ours, fence and all).
                return await store.get_task(written.id) == written

            swapped = await retry_unavailable(
                self.hub.clock, again, exc, what=f"task {record.id}", limit=STORE_OUTAGE_SECONDS
            )
        if swapped:
            return written
        log.warning(
            "task %s was taken over by another instance; its result here is dropped", record.id
        )
        return None

    async def cancel(self, task_id: str) -> bool:
        """Cancel one task by id; False if it is not live."""
        handle = self._live.get(task_id)
        if handle is None or not handle.cancel():
            return False
        await asyncio.gather(handle.result(), return_exceptions=True)
        return True

    async def cancel_room(self, room_id: str) -> None:
        """Cancel every task of `room_id` and forget the room's counters."""
        handles = self.of_room(room_id)
        for handle in handles:
            handle.cancel()
        if handles:
            await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)
        self._counters.pop(room_id, None)

    def forget_room(self, room_id: str) -> None:
        """Drop what is cached for a room leaving memory (its task counter is re-read from
        the store if the room comes back)."""
        self._counters.pop(room_id, None)

    async def cancel_all(self) -> None:
        handles = list(self._live.values())
        for handle in handles:
            handle.cancel()
        if handles:
            await asyncio.gather(*(h.result() for h in handles), return_exceptions=True)


def caller_reason(exc: Exception) -> str:
    """Why a task failed on `exc`, in words a caller may hear: never the exception's text,
    which is written for operators (a store URL, a host and port, a file, a class name)."""
    if isinstance(exc, StoreError):
        return STORE_REASON
    return INTERNAL_REASON


def _task_event(room_id: str, handle: TaskHandle, text: str, **metadata: Any) -> Event:
    return Event(
        kind=EventKind.TASK,
        text=text,
        source="hub",
        role="system",
        source_type=ChannelType.SYSTEM,
        room_id=room_id,
        metadata={"task_id": handle.task_id, "agent_id": handle.agent_id, **metadata},
    )
