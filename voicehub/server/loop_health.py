"""How the server's event loop and memory are doing, for `/health` (and `voicehub soak`).

A ticker sleeps `interval` seconds in a loop and records how late each wake-up was: the
event-loop lag every call on this process feels. `/health` reports the worst lag since the
previous read (so a sampler polling it sees every stall once) and the process's RSS; every
wake-up is also handed to `observe` (the Prometheus histogram), so one ticker serves both.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.core.clock import Clock

__all__ = ["LoopHealth", "resident_mb"]


def resident_mb() -> float:
    """This process's resident set size now, in MB (peak RSS where /proc is missing)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * resource.getpagesize() / 1e6
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak / 1e3


class LoopHealth:
    """Measures event-loop lag with a ticker task (start it inside the running loop)."""

    def __init__(
        self,
        clock: Clock,
        interval: float = 0.1,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self.clock = clock
        self.interval = interval
        self.observe = observe  # each wake-up's lag in seconds
        self._worst = 0.0
        self._ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._ticker is None:
            self._ticker = asyncio.create_task(self._tick())

    async def aclose(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None

    def read_lag_ms(self) -> float:
        """The worst lag since the previous read, in ms (then starts over)."""
        worst, self._worst = self._worst, 0.0
        return round(worst * 1000, 2)

    async def _tick(self) -> None:
        while True:
            due = self.clock.now() + self.interval
            await self.clock.sleep(self.interval)
            lag = max(0.0, self.clock.now() - due)
            self._worst = max(self._worst, lag)
            if self.observe is not None:
                self.observe(lag)
