"""WebRTCTransport with fake channel and tracks: event order, marks, barge-in, caller audio
resampled to the session rate, and the silent-peer watchdog on a virtual clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from voicehub.core.clock import VirtualClock
from voicehub.transports.webrtc import WebRTCTransport
from voicehub.voice.events import Transcript

av = pytest.importorskip("av")


class FakeChannel:
    def __init__(self, state: str = "connecting") -> None:
        self.readyState = state
        self.sent: list[dict[str, Any]] = []
        self.handlers: dict[str, Callable[..., Any]] = {}

    def send(self, data: str | bytes) -> None:
        assert isinstance(data, str)
        self.sent.append(json.loads(data))

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        self.handlers[event] = handler

    def open(self) -> None:
        self.readyState = "open"
        self.handlers["open"]()


class FakeTrack:
    """Caller audio as aiortc delivers Opus: 48 kHz stereo s16 frames of 20 ms."""

    def __init__(self, frames: list[Any]) -> None:
        self.frames = frames

    async def recv(self) -> Any:
        if not self.frames:
            raise EOFError("track ended")
        return self.frames.pop(0)


def stereo_frame(samples: np.ndarray) -> Any:
    interleaved = np.repeat(samples.astype(np.int16), 2).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(interleaved, format="s16", layout="stereo")
    frame.sample_rate = 48000
    return frame


async def test_events_wait_for_the_channel_then_flow_in_order() -> None:
    transport = WebRTCTransport()
    channel = FakeChannel()
    transport.attach_channel(channel)
    await transport.send_event(Transcript(role="user", text="one", final=True))
    await transport.send_event(Transcript(role="user", text="two", final=True))
    assert channel.sent == []
    channel.open()
    await transport.send_event(Transcript(role="user", text="three", final=True))
    assert [e["text"] for e in channel.sent] == ["one", "two", "three"]


async def test_a_mark_goes_out_when_its_audio_has_left_and_barge_in_flushes() -> None:
    transport = WebRTCTransport()
    channel = FakeChannel("open")
    transport.attach_channel(channel)
    await transport.send_audio(bytes(640 * 3))
    await transport.mark("speech-1")
    transport.queue.tick()
    transport.queue.tick()
    assert channel.sent == []  # queued, not yet sent: no mark
    await transport.send_audio(bytes(640 * 50))
    await transport.mark("speech-2")
    marks: list[tuple[str, ...]] = []
    tick = transport.queue.tick()
    marks.append(tick.marks)
    assert marks == [("speech-1",)]
    await transport.clear()  # the caller barged in: 49 frames dropped at once
    assert transport.queue.queued_bytes == 0
    assert channel.sent == [{"type": "clear"}]
    assert transport.queue.tick().marks == ("speech-2",)


async def test_caller_audio_is_resampled_to_the_session_rate_in_20_ms_frames() -> None:
    tone = (8000 * np.sin(2 * np.pi * 440 * np.arange(48000) / 48000)).astype(np.int16)
    frames = [stereo_frame(tone[i : i + 960]) for i in range(0, 48000, 960)]
    transport = WebRTCTransport(sample_rate=16000)
    received: list[bytes] = []

    async def sink(pcm: bytes) -> None:
        received.append(pcm)

    transport.audio_sink = sink
    transport.attach_track(FakeTrack(frames))
    await asyncio.wait_for(transport._reader, 5)  # type: ignore[arg-type]
    assert received and {len(pcm) for pcm in received} == {640}
    assert len(received) >= 49  # one second, less the resampler's few samples of latency
    samples = np.frombuffer(b"".join(received), dtype="<i2").astype(np.float64)
    spectrum = np.abs(np.fft.rfft(samples[1600:]))
    peak_hz = np.argmax(spectrum) * 16000 / (len(samples) - 1600)
    assert abs(peak_hz - 440) < 5
    assert 7000 < np.abs(samples[1600:]).max() < 8200


async def test_a_silent_peer_is_reported_after_the_timeout_on_the_clock() -> None:
    clock = VirtualClock()
    transport = WebRTCTransport(clock=clock, silence_timeout=5.0, peer_state=lambda: "connected")
    watch = asyncio.create_task(transport.watch(check_every=0.5))
    await clock.advance(3.0)
    transport.last_heard = clock.now()  # a frame arrived
    await clock.advance(4.5)
    assert not watch.done()
    await clock.advance(1.0)
    assert watch.done() and watch.result() == "no audio from the caller for 5.5 s"


async def test_ice_failure_is_reported_at_the_next_check() -> None:
    clock = VirtualClock()
    state = "connected"
    transport = WebRTCTransport(clock=clock, silence_timeout=60.0, peer_state=lambda: state)
    watch = asyncio.create_task(transport.watch(check_every=0.5))
    await clock.advance(1.0)
    state = "failed"
    await clock.advance(0.5)
    assert watch.done() and watch.result() == "the connection failed"


async def test_after_close_nothing_is_sent_and_an_abnormal_close_says_why() -> None:
    transport = WebRTCTransport()
    channel = FakeChannel("open")
    transport.attach_channel(channel)
    transport.close(4409, "replaced by a newer connection")
    transport.close(1000, "again")  # only the first close counts
    await transport.send_event(Transcript(role="user", text="late", final=True))
    await transport.send_audio(bytes(640))
    assert channel.sent == [
        {"type": "error", "code": "closed_4409", "message": "replaced by a newer connection"}
    ]
    assert transport.ended.is_set() and transport.queue.queued_bytes == 0
