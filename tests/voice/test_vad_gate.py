"""The caller audio gate: frames go straight to the session while the VAD keeps up, wait
(in order, none dropped) while it lags, and a new VAD stream or a flush resynchronizes."""

from __future__ import annotations

import asyncio

from voicehub.voice.livekit_io import CallerAudioInput
from voicehub.voice.vad_gate import VadProgress

RATE = 16000
FRAME = RATE // 50 * 2


def numbered(count: int) -> bytes:
    """`count` 20 ms frames, each filled with its own number."""
    return b"".join(bytes([index]) * FRAME for index in range(count))


def number_of(frame: object) -> int:
    return int(bytes(frame.data.cast("B"))[0])  # type: ignore[attr-defined]


async def test_paced_frames_go_directly_to_the_sink() -> None:
    progress = VadProgress()
    audio = CallerAudioInput(RATE, progress)
    got: list[int] = []
    audio.deliver_directly(lambda frame: got.append(number_of(frame)))
    for index in range(20):
        audio.push(bytes([index]) * FRAME)
        progress.advance(0.02)  # the VAD keeps up
    assert got == list(range(20))
    assert audio.direct_frames == 20 and progress.waits == 0


async def test_a_burst_waits_for_the_vad_in_order_and_nothing_is_dropped() -> None:
    progress = VadProgress(lookahead=0.1)
    audio = CallerAudioInput(RATE, progress)
    got: list[int] = []
    audio.deliver_directly(lambda frame: got.append(number_of(frame)))
    audio.push(numbered(50))  # one second at once
    direct = list(got)
    assert direct == list(range(len(direct))) and 0 < len(direct) <= 6  # up to 0.1 s ahead

    async def session() -> None:  # what livekit's forwarding task does with the rest
        async for frame in audio:
            got.append(number_of(frame))

    forwarding = asyncio.create_task(session())
    await asyncio.sleep(0)
    assert len(got) == len(direct)  # nothing more until the VAD moves
    while progress.analysed < progress.released or len(got) < 50:
        progress.advance(0.032)  # one Silero window analysed
        for _ in range(5):
            await asyncio.sleep(0)
    audio.push(bytes([50]) * FRAME)  # the queue has drained: direct again
    assert got == list(range(51))
    assert progress.waits > 0
    audio.close()
    await forwarding


async def test_a_frame_behind_a_waiting_frame_waits_too() -> None:
    progress = VadProgress(lookahead=0.1)
    audio = CallerAudioInput(RATE, progress)
    got: list[int] = []
    audio.deliver_directly(lambda frame: got.append(number_of(frame)))
    audio.push(numbered(10))
    queued = 10 - len(got)
    progress.resync()  # a new VAD stream: everything released counts as analysed
    audio.push(bytes([10]) * FRAME)  # the gate is open, but earlier frames still wait
    assert len(got) == 10 - queued

    async def session() -> None:
        async for frame in audio:
            got.append(number_of(frame))

    forwarding = asyncio.create_task(session())
    for _ in range(20):
        progress.resync()
        await asyncio.sleep(0)
    assert got == list(range(11))
    audio.close()
    await forwarding
