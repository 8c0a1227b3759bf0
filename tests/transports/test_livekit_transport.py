"""`RoomAudioTransport` on livekit's real `rtc.AudioSource` (native, no room needed): marks
are confirmed only after the source has played the audio before them, a clear voids them."""

from __future__ import annotations

import asyncio
import time

from livekit import rtc

from voicehub.transports.livekit import RoomAudioTransport
from voicehub.voice.events import Transcript

FRAME = bytes(640)  # 20 ms at 16 kHz


async def test_a_mark_is_confirmed_once_the_source_has_played_the_audio_before_it() -> None:
    source = rtc.AudioSource(16000, 1, queue_size_ms=200)
    transport = RoomAudioTransport(source)
    confirmed: asyncio.Queue[tuple[str, float]] = asyncio.Queue()
    transport.bind(lambda mark: confirmed.put_nowait((mark, time.monotonic())))
    try:
        started = time.monotonic()
        for _ in range(5):  # 100 ms
            await transport.send_audio(FRAME)
        await transport.mark("speech-1")
        await transport.mark("speech-2")  # nothing in between: played together
        mark, at = await asyncio.wait_for(confirmed.get(), 5)
        assert mark == "speech-2" and transport.pending_marks == ()
        assert at - started >= 0.09  # not before the audio could have played
    finally:
        await transport.aclose()
        await source.aclose()


async def test_a_clear_drops_the_queue_and_the_waiting_marks() -> None:
    source = rtc.AudioSource(16000, 1, queue_size_ms=1000)
    transport = RoomAudioTransport(source)
    confirmed: list[str] = []
    transport.bind(confirmed.append)
    try:
        for _ in range(25):  # 500 ms
            await transport.send_audio(FRAME)
        await transport.mark("cut")
        assert source.queued_duration > 0.3
        await transport.clear()
        assert source.queued_duration == 0.0 and transport.pending_marks == ()
        await transport.send_audio(FRAME)
        await transport.mark("next")
        done = asyncio.get_running_loop().create_future()
        transport.bind(lambda mark: (confirmed.append(mark), done.set_result(None)))
        await asyncio.wait_for(done, 5)
        assert confirmed == ["next"]
    finally:
        await transport.aclose()
        await source.aclose()


async def test_events_go_out_as_json_data_and_a_failing_room_does_not_break_the_call() -> None:
    sent: list[bytes] = []

    async def publish(payload: bytes) -> None:
        sent.append(payload)
        if len(sent) > 1:
            raise ConnectionError("room closed")

    source = rtc.AudioSource(16000, 1)
    transport = RoomAudioTransport(source, publish_event=publish)
    event = Transcript(role="assistant", text="hello", final=True)
    await transport.send_event(event)
    await transport.send_event(event)  # raises inside: logged, not propagated
    assert sent[0] == event.to_wire().encode()
    await transport.aclose()
    await transport.send_event(event)
    assert len(sent) == 2
    await source.aclose()
