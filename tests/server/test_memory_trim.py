"""The heap trim after a call: one at a time, in a worker thread."""

from __future__ import annotations

import threading

import pytest

from voicehub.server.memory_trim import MemoryTrimmer

pytestmark = pytest.mark.asyncio


async def test_calls_ending_during_a_trim_share_it() -> None:
    gate = threading.Event()
    pads: list[int] = []

    def trim(pad: int) -> int:
        pads.append(pad)
        gate.wait(10)
        return 1

    trimmer = MemoryTrimmer(trim)
    trimmer.call_ended()
    trimmer.call_ended()  # the first trim has not finished: nothing more to do
    gate.set()
    await trimmer.aclose()
    assert pads == [0] and trimmer.trims == 1
    trimmer.call_ended()
    await trimmer.aclose()
    assert pads == [0, 0] and trimmer.trims == 2


async def test_a_failing_trim_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def trim(pad: int) -> int:
        raise OSError("no heap here")

    trimmer = MemoryTrimmer(trim)
    trimmer.call_ended()
    await trimmer.aclose()
    assert trimmer.trims == 0
    assert "malloc_trim failed" in caplog.text
