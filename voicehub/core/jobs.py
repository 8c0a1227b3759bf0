"""Tasks that run in the background: `TaskSet` holds the ones an object starts and does not
await, `BackgroundJobs` the hub's jobs of each room (tools that return at once:
delegate_workers, delegate_loop)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["BackgroundJobs", "TaskSet", "cancel_and_wait"]

log = logging.getLogger("voicehub.background")

T = TypeVar("T")


class TaskSet:
    """The tasks one object started and does not await: each is held until it finishes
    (the event loop keeps only weak references to tasks, so an unheld one can vanish
    mid-run), and one that fails is logged with `owner` and its name, not dropped
    silently (or handed to `failed`, for an owner whose tasks may fail as a matter of
    course). `cancel` stops them all; `aclose` also waits until they have stopped.

        self._tasks = TaskSet("the call's transport")
        self._tasks.start(self._pump(), name="pump")
    """

    def __init__(
        self, owner: str = "background", *, failed: Callable[[BaseException], None] | None = None
    ) -> None:
        self.owner = owner
        self._failed = failed
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(
        self, coroutine: Coroutine[Any, Any, T], *, name: str | None = None
    ) -> asyncio.Task[T]:
        """Run `coroutine` as a task held until it is done."""
        return self.hold(asyncio.get_running_loop().create_task(coroutine, name=name))

    def hold(self, task: asyncio.Task[T]) -> asyncio.Task[T]:
        """Hold `task`, one already made (by a function that returns its task), until it
        is done, as `start` does."""
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            if self._failed is not None:
                self._failed(error)
            else:
                log.error("%s: task %s failed", self.owner, task.get_name(), exc_info=error)

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    def cancel(self) -> None:
        """Cancel every task still running."""
        for task in list(self._tasks):
            task.cancel()

    async def wait(self) -> None:
        """Until every task (started meanwhile too) has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel every task and wait until they have all stopped."""
        self.cancel()
        await self.wait()


class BackgroundJobs:
    """Keeps references to fire-and-forget coroutines (so they are not garbage collected),
    logs their failures, and lets tests and shutdown wait for or cancel them."""

    def __init__(self) -> None:
        self._jobs: dict[asyncio.Task[Any], str] = {}

    def start(self, coroutine: Coroutine[Any, Any, Any], *, room_id: str) -> asyncio.Task[Any]:
        job = asyncio.create_task(coroutine)
        self._jobs[job] = room_id
        job.add_done_callback(self._done)
        return job

    def _done(self, job: asyncio.Task[Any]) -> None:
        self._jobs.pop(job, None)
        if not job.cancelled() and job.exception() is not None:
            log.error("background job failed", exc_info=job.exception())

    def of_room(self, room_id: str) -> list[asyncio.Task[Any]]:
        return [job for job, owner in self._jobs.items() if owner == room_id]

    async def wait(self) -> None:
        """Wait until every job (including ones started meanwhile) has finished."""
        while self._jobs:
            await asyncio.gather(*list(self._jobs), return_exceptions=True)

    async def cancel_room(self, room_id: str) -> None:
        jobs = self.of_room(room_id)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has finished; its other exceptions propagate.

    Unlike `task.cancel()` then `await task` under `suppress(CancelledError)`, this never
    swallows a cancellation of the caller itself that arrives while it waits: that left a
    delivery driver running after its call ended, waiting forever.
    """
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.result()
