"""The worker's load as LiveKit sees it: voicehub's live calls against a capacity (and, with
`--max-load`, the machine's CPU: the worst of the two). Above its threshold the worker
reports itself full and LiveKit dispatches new rooms to other workers: the LiveKit form of
a busy answer (`voicehub.desks.call_admission` is the server's).

livekit-agents runs each job in a process of its own (or a thread, in tests), while the
availability answers and status updates come from the worker's main process. The call count
therefore lives in shared memory: job processes count their calls in, the main process
reads the load. The counter is handed to the job processes with the entrypoint when they
are started, which is how `multiprocessing` shares such memory.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.context import BaseContext
from typing import Any

from voicehub.errors import ConfigError

__all__ = ["CallLoad", "machine_cpu"]


class CallLoad:
    """Live calls out of `capacity`; `load()` is LiveKit's 0..1 figure (1 = full)."""

    def __init__(
        self,
        capacity: int,
        *,
        context: BaseContext | None = None,
        cpu: Callable[[], float] | None = None,
    ) -> None:
        if capacity < 1:
            raise ConfigError(f"worker capacity {capacity}: expected at least one call")
        self.capacity = capacity
        self.cpu = cpu  # the machine's CPU in use, 0..1 (None: calls only)
        ctx: Any = context or multiprocessing.get_context()
        self._calls: Any = ctx.Value("i", 0)

    @property
    def calls(self) -> int:
        """Calls live on this worker now (across its job processes)."""
        return int(self._calls.value)

    def call_started(self) -> None:
        with self._calls.get_lock():
            self._calls.value += 1

    def call_ended(self) -> None:
        with self._calls.get_lock():
            self._calls.value = max(self._calls.value - 1, 0)

    def load(self) -> float:
        """The share of the capacity in use (may pass 1 if LiveKit sent more calls), or the
        CPU in use when that is higher."""
        calls = self.calls / self.capacity
        return calls if self.cpu is None else max(calls, self.cpu())

    def threshold(self) -> float:
        """The load at which the worker reports itself full: no room for one more call."""
        return (self.capacity - 0.5) / self.capacity


def machine_cpu() -> float:
    """The machine's CPU in use since the previous call, 0..1 (what livekit's own load
    function reports)."""
    import psutil  # type: ignore[import-untyped]

    return float(psutil.cpu_percent(interval=None)) / 100.0
