"""Taking over the background work of a lost instance, and telling the caller.

When an instance's heartbeat lapses (`voicehub.orchestration.instances`), its unfinished tasks
are orphans: nobody will finish them or deliver their results. A surviving instance claims
each orphan with a compare-and-set on the task's fence (marking it failed, owner: itself), so
exactly one survivor acts on it, then finishes each background dispatch those tasks belonged
to, per the desk's `on_instance_loss`:

- "retry": the dispatch's unfinished workers run again here (in parallel, or the rest of the
  sequence), the results that had come back are kept, and the combined result is delivered
  with a note that the work was restarted. A dispatch restarted `MAX_RESTARTS` times fails.
- "fail": the result delivered says which part was lost, with what had come back.

Either way the caller is told, through the delivery service like any result (held until
they call back if no call is live). Tasks that are not part of a `delegate_workers`
dispatch (loops, the manager's `delegate`, a blackboard) are reported failed: re-running one
step of those alone would not give the caller a meaningful answer.

The report's delivery id is derived from the dispatch, so even two survivors racing over
orphans of one dispatch (three or more instances) store a single report.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import TaskRecord, TaskStatus
from voicehub.core.trusted import replace
from voicehub.delivery.policy import DeliveryStrategy, strategy_from_json
from voicehub.orchestration.delegation import (
    INTERNAL_REASON,
    STORE_REASON,
    TaskHandle,
    TaskResult,
)
from voicehub.orchestration.runtime import OrchestrationRuntime
from voicehub.orchestration.supervisor import combine

__all__ = [
    "DEFAULT_ON_INSTANCE_LOSS",
    "LOST_REASON",
    "MAX_RESTARTS",
    "LossHandling",
    "OnInstanceLoss",
    "TaskRecovery",
]

log = logging.getLogger("voicehub.recovery")

OnInstanceLoss = Literal["retry", "fail"]

DEFAULT_ON_INSTANCE_LOSS: OnInstanceLoss = "retry"
"""Research-like work is safe to run again and the caller would rather have the answer; a
desk whose workers act on the world (book, send, pay) should say "fail"."""

MAX_RESTARTS = 2
LOST_REASON = "its server stopped before it finished"
UNFINISHED = (TaskStatus.QUEUED, TaskStatus.RUNNING)


class LossHandling(Protocol):
    """What recovery needs to know about a conversation's room from the composition side."""

    def on_instance_loss(self, room_id: str) -> OnInstanceLoss:
        """The room's desk setting."""
        ...

    async def open_room(self, room_id: str) -> None:
        """Load the room in this hub with its desk's agents (nothing if it is loaded);
        raises VoicehubError when this instance cannot serve it."""
        ...

    async def release_room(self, room_id: str) -> None:
        """Unload the room again unless a call holds it here."""
        ...


class TaskRecovery:
    """Claims a lost instance's unfinished tasks and finishes or fails their dispatches."""

    def __init__(
        self,
        hub: OrchestrationRuntime,
        handling: LossHandling,
        *,
        instance_id: str,
        wall: Callable[[], float],
    ) -> None:
        self.hub = hub
        self.handling = handling
        self.instance_id = instance_id
        self.wall = wall
        # Not the hub's room jobs: a room's jobs keep it loaded, and this job releases it.
        self._reports = TaskSet("the reports of lost tasks")

    async def wait(self) -> None:
        """Wait until every report started so far has been delivered (tests, shutdown)."""
        await self._reports.wait()

    async def aclose(self) -> None:
        """Stop the reports still running (shutdown)."""
        await self._reports.aclose()

    async def take_over(self, lost: str) -> list[TaskRecord]:
        """Claim the unfinished tasks of instance `lost` (those another survivor has not
        claimed first) and start reporting them in the background. Returns the claimed.
        A store error stops the claims and propagates (the next sweep claims the rest);
        what was claimed is reported either way."""
        orphans = [
            task
            for task in await self.hub.store.list_tasks(statuses=UNFINISHED)
            if task.owner == lost
        ]
        claimed: list[TaskRecord] = []
        try:
            for orphan in orphans:
                if (task := await self._claim(orphan, lost)) is not None:
                    claimed.append(task)
        finally:
            self._start_reports(claimed, lost)
        return claimed

    def _start_reports(self, claimed: list[TaskRecord], lost: str) -> None:
        dispatches: dict[tuple[str, str], list[TaskRecord]] = defaultdict(list)
        for task in claimed:
            dispatch = task.metadata.get("dispatch")
            key = dispatch["id"] if isinstance(dispatch, dict) else f"lone:{task.id}"
            dispatches[task.parent_room_id, key].append(task)
        for (room_id, _), tasks in dispatches.items():
            self._reports.start(self._report(room_id, tasks, lost), name=f"report to {room_id}")
        if claimed:
            log.warning(
                "instance %s was lost: took over %d of its tasks (%s)",
                lost,
                len(claimed),
                ", ".join(t.id for t in claimed),
            )

    async def _claim(self, task: TaskRecord, lost: str) -> TaskRecord | None:
        claimed = replace(
            task,
            status=TaskStatus.FAILED,
            reason=LOST_REASON,
            owner=self.instance_id,
            fence=task.fence + 1,
            finished_at=self.wall(),
            metadata={**task.metadata, "lost_instance": lost},
        )
        if await self.hub.store.swap_task(claimed, expected_fence=task.fence):
            return claimed
        return None

    async def _report(self, room_id: str, claimed: list[TaskRecord], lost: str) -> None:
        dispatch = claimed[0].metadata.get("dispatch")
        if not isinstance(dispatch, dict):
            await self._deliver(
                room_id,
                _lost_text(None, [_result(t) for t in claimed]),
                None,
                {
                    "kind": "instance_loss",
                    "recovered": "fail",
                    "task_ids": [t.id for t in claimed],
                    "lost_instance": lost,
                },
                delivery_id=f"{claimed[0].id}:lost",
            )
            return
        policy = self.handling.on_instance_loss(room_id)
        restarts = int(dispatch.get("restarts", 0))
        if policy == "retry" and restarts >= MAX_RESTARTS:
            log.warning("dispatch %s was restarted %d times: failing it", dispatch["id"], restarts)
            policy = "fail"
        latest = await self._latest_by_worker(room_id, str(dispatch["id"]))
        claimed_ids = {t.id for t in claimed}
        if policy == "retry":
            try:
                results = await self._rerun(room_id, dispatch, latest, claimed_ids)
            except Exception:
                log.exception("could not restart dispatch %s in room %s", dispatch["id"], room_id)
                policy = "fail"
        if policy == "fail":
            results = [
                _result(latest[w]) if w in latest else _not_started(room_id, w)
                for w in dispatch["workers"]
            ]
        if any(r.taken_over for r in results):
            return  # yet another instance took the rerun over and reports it
        task = str(dispatch["task"])
        text = _restarted_text(task, results) if policy == "retry" else _lost_text(task, results)
        metadata = {
            "kind": "supervisor",
            "task": task,
            "task_ids": [r.task_id for r in results],
            "statuses": [r.status.value for r in results],
            "recovered": policy,
            "lost_instance": lost,
        }
        delivery = dispatch.get("delivery")
        strategy = strategy_from_json(delivery) if isinstance(delivery, dict) else None
        await self._deliver(
            room_id, text, strategy, metadata, delivery_id=f"{dispatch['id']}:lost-{restarts}"
        )

    async def _latest_by_worker(self, room_id: str, dispatch_id: str) -> dict[str, TaskRecord]:
        """The last task of each worker in the dispatch (tasks list in creation order)."""
        latest: dict[str, TaskRecord] = {}
        for task in await self.hub.store.list_tasks(parent_room_id=room_id):
            dispatch = task.metadata.get("dispatch")
            if isinstance(dispatch, dict) and dispatch.get("id") == dispatch_id:
                latest[task.agent_id] = task
        return latest

    async def _rerun(
        self,
        room_id: str,
        dispatch: dict[str, Any],
        latest: dict[str, TaskRecord],
        claimed: set[str],
    ) -> list[TaskResult]:
        """Run the workers whose work was lost (or never started) again, here; keep the
        results that had come back."""
        kept = {  # answers that came back; a task lost with an instance is run again
            worker: _result(record)
            for worker, record in latest.items()
            if record.id not in claimed
            and record.status.finished
            and "lost_instance" not in record.metadata
        }
        group = {"dispatch": {**dispatch, "restarts": int(dispatch.get("restarts", 0)) + 1}}
        task, workers = str(dispatch["task"]), list(dispatch["workers"])
        await self.handling.open_room(room_id)
        try:
            if dispatch.get("strategy") != "sequential":
                missing = [w for w in workers if w not in kept]
                handles = [await self._delegate(w, task, room_id, group) for w in missing]
                fresh = await asyncio.gather(*(h.result() for h in handles))
                kept.update(zip(missing, fresh, strict=True))
                return [kept[w] for w in workers]
            results: list[TaskResult] = []
            for worker in workers:
                result = kept.get(worker)
                if result is None:
                    step = _sequence_step(task, results[-1] if results else None)
                    handle = await self._delegate(worker, step, room_id, group)
                    result = await handle.result()
                results.append(result)
                if result.taken_over:
                    break
            return results
        finally:
            await self.handling.release_room(room_id)

    async def _delegate(
        self, worker: str, task: str, room_id: str, group: dict[str, Any]
    ) -> TaskHandle:
        timeout = group["dispatch"].get("timeout")  # the desk's task_timeout, if it had one
        return await self.hub.delegate(
            worker,
            task,
            room_id,
            metadata=group,
            timeout=float(timeout) if timeout is not None else None,
        )

    async def _deliver(
        self,
        room_id: str,
        text: str,
        strategy: DeliveryStrategy | None,
        metadata: dict[str, Any],
        *,
        delivery_id: str,
    ) -> None:
        await self.hub.deliver(room_id, text, strategy, metadata=metadata, delivery_id=delivery_id)


def _result(task: TaskRecord) -> TaskResult:
    return TaskResult(
        task.id, task.agent_id, task.parent_room_id, task.status, task.output, _spoken(task)
    )


_EXCEPTION_TEXT = re.compile(r"^[A-Z]\w*(?:Error|Exception)\b")


def _spoken(task: TaskRecord) -> str:
    """The record's reason, to be spoken: a record stored by an older voicehub may hold an
    exception's text (a store URL, a class name) where a caller-safe reason now is."""
    if _EXCEPTION_TEXT.match(task.reason):
        return STORE_REASON if "StoreError" in task.reason else INTERNAL_REASON
    return task.reason


def _sequence_step(task: str, previous: TaskResult | None) -> str:
    """A step of a sequential dispatch sees the previous worker's answer, as it would have."""
    if previous is None or not previous.ok:
        return task
    return f"{task}\n\nPrevious result from {previous.agent_id}:\n{previous.output}"


def _not_started(room_id: str, worker: str) -> TaskResult:
    return TaskResult("", worker, room_id, TaskStatus.FAILED, reason=LOST_REASON)


def _restarted_text(task: str, results: Sequence[TaskResult]) -> str:
    return (
        f"I had to restart the work on {task}, because one of our servers stopped. "
        f"Here is what came back.\n{combine(results)}"
    )


def _lost_text(task: str | None, results: Sequence[TaskResult]) -> str:
    what = f"the work on {task}" if task else "some work I had started"
    return (
        f"I'm sorry: {what} was lost when one of our servers stopped. Please ask me again if "
        f"you still need it.\n{combine(results)}"
    )
