"""The heap trim after a call: one at a time, in a worker thread."""

from __future__ import annotations

import threading

import pytest

from voicehub.server.memory_trim import MemoryTrimmer

pytestmark = pytest.mark.asyncio


async def test_calls_ending_during_a_trim_share_one_more() -> None:
    gate = threading.Event()
    pads: list[int] = []

    def trim(pad: int) -> int:
        pads.append(pad)
        gate.wait(10)
        return 1

    trimmer = MemoryTrimmer(trim)
    trimmer.call_ended()
    # Two calls end while the first trim runs: what they free may be in arenas it has
    # walked already, and no call may come after them, so one more trim follows it.
    trimmer.call_ended()
    trimmer.call_ended()
    gate.set()
    await trimmer.aclose()
    assert pads == [0, 0] and trimmer.trims == 2
    trimmer.call_ended()
    await trimmer.aclose()
    assert pads == [0, 0, 0] and trimmer.trims == 3


async def test_a_failing_trim_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def trim(pad: int) -> int:
        raise OSError("no heap here")

    trimmer = MemoryTrimmer(trim)
    trimmer.call_ended()
    await trimmer.aclose()
    assert trimmer.trims == 0
    assert "malloc_trim failed" in caplog.text
