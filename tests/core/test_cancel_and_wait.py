"""`cancel_and_wait`: the task ends, and a cancellation of the waiter is never swallowed."""

from __future__ import annotations

import asyncio

import pytest

from voicehub.core.jobs import cancel_and_wait


async def test_the_task_is_cancelled_and_finished() -> None:
    task = asyncio.create_task(asyncio.Event().wait())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()


async def test_a_cancelled_waiter_stops_too() -> None:
    stuck = asyncio.Event()

    async def slow_to_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await stuck.wait()  # cleanup that takes a while

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    after_wait: list[str] = []

    async def waiter() -> None:
        await cancel_and_wait(inner)
        after_wait.append("ran on")  # must never happen once the waiter is cancelled
        await asyncio.Event().wait()

    outer = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert after_wait == []
    stuck.set()
    await asyncio.wait({inner})


async def test_other_exceptions_of_the_task_propagate() -> None:
    async def broken() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            raise RuntimeError("cleanup failed")

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(task)
