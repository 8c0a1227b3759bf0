"""Clocks. Everything time-dependent takes a `Clock` so tests can run on virtual time.
`WakeAt` is the answer of a pure decision that has nothing to do yet."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Nothing to do yet: decide again at `time`, on the clock the decision was taken on
    (always later than the `now` it was given), or earlier when something it reads
    changes. The delivery policy, the follow-up of held results and the turn policy answer
    with it."""

    time: float


class Clock(Protocol):
    """Monotonic time in seconds, and sleeping on that time."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real monotonic clock on the running event loop."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """A clock that only moves when a test calls `advance` (or `run_until_idle`).

    Sleepers are woken in deadline order; after each wake-up the event loop is drained so
    the woken code runs before time moves again. No wall-clock time passes.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._counter = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._counter), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, waking every sleeper whose deadline passes, in order."""
        target = self._now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
            await settle()
        self._now = target
        await settle()

    def next_deadline(self) -> float | None:
        """The earliest pending sleeper deadline, if any sleeper is live."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None


async def wait_or_sleep(clock: Clock, event: asyncio.Event, seconds: float) -> None:
    """Until `event` is set or `seconds` pass on `clock`, whichever comes first."""
    changed = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait({changed, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        changed.cancel()
        sleeper.cancel()


async def settle(rounds: int = 50) -> None:
    """Let every ready callback on the loop run (tasks woken by other tasks included)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
