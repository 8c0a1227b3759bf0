"""Background jobs started by tools that return at once (delegate_workers, delegate_loop)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("voicehub.background")


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
