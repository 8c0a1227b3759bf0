"""Counting the event loop's wake-ups: the callbacks it runs, each a task step, a timer, a
future's callback or a worker thread's result coming back."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["WakeupCounter"]


class WakeupCounter:
    """Counts the callbacks the event loop runs (task steps, timers, future callbacks, a
    worker thread's results) while entered: each is one wake-up. It slows every callback
    down, so CPU figures are taken in runs without it."""

    def __init__(self) -> None:
        self.count = 0
        self._run: Any = None

    def __enter__(self) -> WakeupCounter:
        self._run = run = asyncio.events.Handle._run
        counter = self

        def counted(handle: asyncio.events.Handle) -> None:
            counter.count += 1
            run(handle)

        asyncio.events.Handle._run = counted  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
