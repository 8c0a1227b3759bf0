"""A soak caller never waits forever on an utterance the server cut off."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from voicehub_dev.soak.caller import say_within_call


class CutOffCall:
    """`say` never finishes (the socket closed mid-utterance); `closed` turns true."""

    def __init__(self) -> None:
        self.closed = False
        self.change = asyncio.Event()

    async def say(self, pcm16: bytes, label: str) -> None:
        await asyncio.Event().wait()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        while not predicate():
            self.change.clear()
            await self.change.wait()

    def hang_up_from_server(self) -> None:
        self.closed = True
        self.change.set()


class FinishingCall(CutOffCall):
    async def say(self, pcm16: bytes, label: str) -> None:
        return None


async def test_an_utterance_cut_off_by_the_server_fails_the_call_not_the_run() -> None:
    call = CutOffCall()
    saying = asyncio.create_task(say_within_call(cast(Any, call), bytes(3200), "request"))
    await asyncio.sleep(0)
    call.hang_up_from_server()
    with pytest.raises(ConnectionError, match="could not finish saying 'request'"):
        await saying


async def test_a_finished_utterance_returns() -> None:
    await say_within_call(cast(Any, FinishingCall()), bytes(3200), "request")
