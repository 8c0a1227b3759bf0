"""Counting the event loop's wake-ups: the callbacks it runs, each a task step, a timer, a
future's callback or a worker thread's result coming back.

The bench runs its sections on a `CountingEventLoop` (`asyncio.Runner(loop_factory=...)`).
While a `WakeupCounter` is entered, the loop's public scheduling methods (`call_soon`,
`call_later`, `call_at`, `call_soon_threadsafe`: what tasks, futures, timers and executors
schedule through) count each callback when it runs; outside, the loop's own methods run
untouched, so CPU figures taken without the counter pay nothing for it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

__all__ = ["CountingEventLoop", "WakeupCounter"]


class CountingEventLoop(asyncio.SelectorEventLoop):
    """An event loop that can count the callbacks it runs (see the module docstring)."""

    def count_wakeups(self, counter: WakeupCounter | None) -> None:
        """Count into `counter` from now on (None: stop counting)."""
        if counter is None:
            for name in ("call_soon", "call_later", "call_at", "call_soon_threadsafe"):
                self.__dict__.pop(name, None)  # the class's methods again
            return

        def counted(callback: Callable[..., Any], *args: Any) -> None:
            counter.count = (counter.count or 0) + 1
            callback(*args)

        base = asyncio.SelectorEventLoop

        def soon(callback: Callable[..., Any], *args: Any, **kw: Any) -> asyncio.Handle:
            return base.call_soon(self, functools.partial(counted, callback), *args, **kw)

        def threadsafe(callback: Callable[..., Any], *args: Any, **kw: Any) -> asyncio.Handle:
            return base.call_soon_threadsafe(
                self, functools.partial(counted, callback), *args, **kw
            )

        def later(delay: float, callback: Callable[..., Any], *args: Any, **kw: Any) -> Any:
            return base.call_later(self, delay, functools.partial(counted, callback), *args, **kw)

        def at(when: float, callback: Callable[..., Any], *args: Any, **kw: Any) -> Any:
            return base.call_at(self, when, functools.partial(counted, callback), *args, **kw)

        self.call_soon = soon  # type: ignore[method-assign, assignment]
        self.call_soon_threadsafe = threadsafe  # type: ignore[method-assign, assignment]
        self.call_later = later  # type: ignore[method-assign, assignment]
        self.call_at = at  # type: ignore[method-assign, assignment]


class WakeupCounter:
    """Counts the callbacks the running loop runs while entered (a `CountingEventLoop`;
    on another loop it counts nothing and `count` stays None). It slows every callback
    down, so CPU figures are taken in runs without it."""

    def __init__(self) -> None:
        self.count: int | None = None
        self._loop: CountingEventLoop | None = None

    def __enter__(self) -> WakeupCounter:
        loop = asyncio.get_running_loop()
        if isinstance(loop, CountingEventLoop):
            self.count, self._loop = 0, loop
            loop.count_wakeups(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.count_wakeups(None)
