"""The suite's one way to wait for a condition: `until`.

A test waits on what it observes (a store row, an event the transport got, a process's
API answer), never on a length of time: `until` checks `condition` again and again until
it is true and returns what it returned. The real-time `timeout` only bounds a broken run
(the failure names `what` was awaited); a passing run takes as long as the system does.

With a `VirtualClock`, virtual time moves by `step` between checks (the code under test
sleeps on that clock), up to `virtual_limit` seconds of it: the test runs as fast as the
loop allows and the limit is a behaviour ("delivered within 10 s of call time").

Between checks `until` yields to the loop (`poll=0`: the check is a store round trip or
the state of this loop's tasks) or sleeps `poll` seconds of real time (the state of another
thread or process, with no event to await).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from voicehub.core.clock import VirtualClock
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity

T = TypeVar("T")

TIMEOUT = 60.0  # seconds of real time after which a wait has failed (a broken run)


async def until(
    condition: Callable[[], T | Awaitable[T]],
    *,
    what: str | None = None,
    timeout: float = TIMEOUT,
    poll: float = 0.02,
    clock: VirtualClock | None = None,
    step: float = 0.02,
    virtual_limit: float | None = None,
) -> T:
    """Check `condition` (a function, or a coroutine function) until it returns something
    truthy, and return that (see the module). Fails with an AssertionError naming `what`
    (default: the condition's name) after `timeout` seconds of real time, or after
    `virtual_limit` seconds of `clock`'s time."""
    name = what or getattr(condition, "__qualname__", repr(condition))
    deadline = time.monotonic() + timeout
    start = clock.now() if clock is not None else 0.0
    while True:
        if found := await _check(condition):
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {name}: never true")
        await asyncio.sleep(poll)
        if clock is not None:  # the condition had `poll` seconds to come true: time moves
            if found := await _check(condition):
                return found
            if virtual_limit is not None and clock.now() - start >= virtual_limit:
                raise AssertionError(f"{name}: not true within {virtual_limit:g} s of clock time")
            await clock.advance(step)


async def _check(condition: Callable[[], T | Awaitable[T]]) -> T:
    found = condition()
    if inspect.isawaitable(found):
        return await found
    return found


async def stays_false(
    condition: Callable[[], T | Awaitable[T]], *, seconds: float, poll: float = 0.01
) -> None:
    """`condition` is still false after `seconds` of real time (for something that must
    not happen, where no event says it did not: keep `seconds` short)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = await _check(condition)
        assert not found, f"{getattr(condition, '__qualname__', condition)} came true: {found!r}"
        await asyncio.sleep(poll)


async def until_activity(
    activity: VoiceActivity,
    predicate: Callable[[ActivitySnapshot], bool],
    *,
    timeout: float = TIMEOUT,
) -> ActivitySnapshot:
    """The first snapshot of a call's `activity` for which `predicate` holds: woken by each
    change of it, not polled. Fails after `timeout` seconds of real time."""

    async def changes() -> ActivitySnapshot:
        snapshot = activity.snapshot()
        while not predicate(snapshot):
            snapshot = await activity.wait_for_change(snapshot.version)
        return snapshot

    try:
        return await asyncio.wait_for(changes(), timeout)
    except TimeoutError:
        raise AssertionError(
            f"waited {timeout:g} s for {predicate.__qualname__}: activity is {activity.snapshot()}"
        ) from None
