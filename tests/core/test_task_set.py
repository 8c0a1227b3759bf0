"""`TaskSet`: background tasks held until done, failures logged, cancelled together."""

from __future__ import annotations

import asyncio
import logging

import pytest

from voicehub.core.jobs import TaskSet


async def test_a_task_is_held_until_it_finishes() -> None:
    tasks = TaskSet()
    release = asyncio.Event()
    task = tasks.start(release.wait(), name="waiter")
    assert list(tasks) == [task] and len(tasks) == 1
    release.set()
    await task
    await asyncio.sleep(0)  # the done callback runs on the next turn of the loop
    assert len(tasks) == 0


async def test_a_failing_task_is_logged_with_its_owner_and_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fail() -> None:
        raise RuntimeError("the socket broke")

    tasks = TaskSet("the call's transport")
    with caplog.at_level(logging.ERROR, logger="voicehub.background"):
        task = tasks.start(fail(), name="pump")
        await asyncio.wait({task})
        await asyncio.sleep(0)
    [record] = caplog.records
    assert record.getMessage() == "the call's transport: task pump failed"
    assert record.exc_info is not None and "the socket broke" in str(record.exc_info[1])
    assert len(tasks) == 0


async def test_a_cancelled_task_is_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    tasks = TaskSet()
    with caplog.at_level(logging.ERROR, logger="voicehub.background"):
        tasks.start(asyncio.Event().wait())
        await tasks.aclose()
    assert not caplog.records and len(tasks) == 0


async def test_aclose_cancels_every_task_and_waits_for_them() -> None:
    tasks = TaskSet()
    stopped: list[str] = []

    async def run(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(name)

    for name in ("a", "b"):
        tasks.start(run(name))
    await asyncio.sleep(0)
    await tasks.aclose()
    assert sorted(stopped) == ["a", "b"] and len(tasks) == 0


async def test_wait_includes_tasks_started_meanwhile() -> None:
    tasks = TaskSet()
    done: list[str] = []

    async def second() -> None:
        done.append("second")

    async def first() -> None:
        tasks.start(second())
        done.append("first")

    tasks.start(first())
    await tasks.wait()
    assert done == ["first", "second"]
