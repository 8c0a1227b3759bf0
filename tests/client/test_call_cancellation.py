"""Ctrl-C during a call is never lost: a cancellation that arrives as the awaited message
does ends the wait (on Python 3.11 `asyncio.wait_for` returned the result instead, so a
Ctrl-C at the moment the server's `session` arrived was swallowed and the call ran on)."""

from __future__ import annotations

import asyncio

import pytest

from voicehub.client.call import CallClient, CallOptions


async def test_a_cancellation_arriving_with_the_awaited_message_is_not_swallowed() -> None:
    call = CallClient(CallOptions(desk="research"))
    arrived = False
    waiter = asyncio.create_task(call.wait_for(lambda: arrived, timeout=10))
    await asyncio.sleep(0)  # waiting for the next message
    arrived = True
    call._notify()  # the message arrives (what the receiver does on each one)...
    waiter.cancel()  # ...in the same instant as Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await waiter


async def test_the_wait_still_ends_when_the_message_arrives() -> None:
    call = CallClient(CallOptions(desk="research"))
    arrived = False
    waiter = asyncio.create_task(call.wait_for(lambda: arrived, timeout=10))
    await asyncio.sleep(0)
    arrived = True
    call._notify()
    await waiter
