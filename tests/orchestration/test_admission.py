"""Admission: exact counting, first-in first-out, a full room does not block others."""

from __future__ import annotations

import asyncio

import pytest

from voicehub.core.clock import settle
from voicehub.orchestration.admission import Admission


async def test_slots_are_counted_per_hub_and_per_room() -> None:
    admission = Admission(max_total=3, max_per_room=2)
    assert admission.try_take("a")
    assert admission.try_take("a")
    assert not admission.try_take("a")  # room a is full
    assert admission.try_take("b")
    assert not admission.try_take("c")  # the hub is full
    admission.release("b")
    assert admission.try_take("c")


async def test_waiters_are_admitted_oldest_first_skipping_full_rooms() -> None:
    admission = Admission(max_total=2, max_per_room=1)
    assert admission.try_take("a") and admission.try_take("b")
    order: list[str] = []

    async def wait(room: str) -> None:
        await admission.take(room)
        order.append(room)

    waiters = [asyncio.create_task(wait(room)) for room in ("a", "c", "d")]
    await settle()
    assert order == []
    admission.release("b")  # a is still full, so c (next in line that fits) goes
    await settle()
    assert order == ["c"]
    admission.release("a")  # the oldest waiter, a, fits now
    await settle()
    assert order == ["c", "a"]
    assert not admission.try_take("e")  # d is still waiting: no jumping the line
    admission.release("c")
    await settle()
    assert order == ["c", "a", "d"]
    await asyncio.gather(*waiters)


async def test_cancelling_a_wait_gives_up_the_place() -> None:
    admission = Admission(max_total=1, max_per_room=1)
    assert admission.try_take("a")
    waiter = asyncio.create_task(admission.take("b"))
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    admission.release("a")
    assert admission.try_take("c")  # nobody holds or waits for the slot any more


async def test_a_grant_cancelled_before_it_is_used_is_given_back() -> None:
    admission = Admission(max_total=1, max_per_room=1)
    assert admission.try_take("a")
    waiter = asyncio.create_task(admission.take("b"))
    await settle()
    admission.release("a")  # grants the slot to b...
    waiter.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert admission.try_take("c")
