"""Over WebRTC a speech mark rides the data channel and the audio before it rides RTP, through
a jitter buffer and a decoder: on a starved machine the mark arrives seconds before its last
audio (a full-suite run picked a result's segments wrongly that way: its first audio had been
taken into the previous speech's segment). `WebRTCLink` holds a mark, and every message after
it, until its track has played as far as the mark's `track_ms`, so `CallClient` sees what a
WebSocket gives: a speech's audio, then its mark.

The link runs on stand-ins for aiortc's peer and channel; the track yields real PyAV frames
with the pts an aiortc receiver gives (its RTP clock from the first packet), so the test
decides when each frame and each message arrives."""

from __future__ import annotations

import asyncio
import fractions
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.support.waiting import until
from voicehub.client.webrtc import WebRTCLink

av = pytest.importorskip("av")

RATE = 48000
FRAME = RATE // 50  # one 20 ms packet


class Emitter:
    """aiortc's `.on(event, handler)` and `@.on(event)`, and a way to fire them."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[..., Any]] = {}
        self.readyState = "open"
        self.connectionState = "connected"

    def on(self, event: str, handler: Callable[..., Any] | None = None) -> Any:
        if handler is not None:
            self.handlers[event] = handler
            return handler
        return lambda fn: self.on(event, fn)

    def emit(self, event: str, *args: Any) -> None:
        self.handlers[event](*args)

    def send(self, message: str) -> None:
        pass

    async def close(self) -> None:
        pass


class Track:
    """The agent's track as the receiver yields it: frames the test releases one by one."""

    kind = "audio"

    def __init__(self) -> None:
        self.frames: asyncio.Queue[Any] = asyncio.Queue()
        self.pts = 0
        self.waiting = False

    def play(self, seconds: float, loud: bool = True) -> None:
        for _ in range(round(seconds * 50)):
            samples = np.full(FRAME, 3000 if loud else 0, dtype=np.int16)
            frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = RATE
            frame.pts = self.pts
            frame.time_base = fractions.Fraction(1, RATE)
            self.pts += FRAME
            self.frames.put_nowait(frame)

    async def recv(self) -> Any:
        self.waiting = True
        frame = await self.frames.get()
        self.waiting = False
        return frame


class Call:
    """A link fed by hand, and what it has passed on so far, in order."""

    def __init__(self) -> None:
        self.channel, self.connection, self.track = Emitter(), Emitter(), Track()
        self.link = WebRTCLink(self.connection, self.channel)
        self.connection.emit("track", self.track)
        self.seen: list[str] = []  # "audio" per 20 ms at 16 kHz, else the event's type
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for item in self.link:
            if isinstance(item, bytes):
                self.seen += ["audio"] * (len(item) // 640)
            else:
                self.seen.append(json.loads(item)["type"])

    def say(self, event: dict[str, Any]) -> None:
        self.channel.emit("message", json.dumps(event))

    async def settled(self) -> None:
        """Every frame given so far has been read and passed on."""
        await until(lambda: self.track.frames.empty() and self.track.waiting, poll=0)
        for _ in range(3):
            await asyncio.sleep(0)

    async def close(self) -> None:
        await self.link.close()
        await self._reader


def mark(track_ms: int | None) -> dict[str, Any]:
    return {"type": "speech_mark", "id": "room/speech-1", "track_ms": track_ms}


TRANSCRIPT = {"type": "transcript", "role": "agent", "text": "Here is what I found.", "final": True}


async def test_a_mark_that_overtakes_its_audio_waits_for_the_audio_and_what_follows_it_too() -> (
    None
):
    call = Call()
    call.track.play(0.2)
    await call.settled()
    call.say(mark(track_ms=1000))  # the speech's audio ends 1 s into the track
    call.say(TRANSCRIPT)
    await call.settled()
    assert call.seen == ["audio"] * len(call.seen)  # the mark and the transcript behind it wait

    call.track.play(0.78)
    await call.settled()
    assert "speech_mark" not in call.seen  # 20 ms of its audio still to come

    call.track.play(0.04)  # its last frame, and the packet carrying the encoder's tail
    await call.settled()
    # all 1,000 ms of the speech's audio (50 frames at 16 kHz) come before its mark
    assert call.seen == ["audio"] * 50 + ["speech_mark", "transcript"]
    await call.close()


async def test_a_mark_whose_audio_has_all_arrived_passes_at_once() -> None:
    call = Call()
    call.track.play(1.04)
    await call.settled()
    call.say(mark(track_ms=1000))
    call.say(TRANSCRIPT)
    await call.settled()
    assert call.seen[call.seen.index("speech_mark") :] == ["speech_mark", "transcript"]
    assert call.seen.index("speech_mark") >= 50
    await call.close()


async def test_a_mark_the_next_speech_follows_closely_is_passed_between_them() -> None:
    call = Call()
    call.say(mark(track_ms=400))
    call.track.play(0.42)  # the first speech and the tail packet
    call.track.play(0.2)  # the next speech, straight after: no silent frame between
    await call.settled()
    assert call.seen.index("speech_mark") == 20  # its 400 ms, none of the next speech
    await call.close()


async def test_a_mark_that_does_not_say_where_its_audio_ends_waits_for_silence() -> None:
    call = Call()
    call.track.play(0.2)
    await call.settled()
    call.say(mark(track_ms=None))
    call.track.play(0.4)
    await call.settled()
    assert "speech_mark" not in call.seen
    call.track.play(0.1, loud=False)  # the resampler's ringing, then silent frames
    await call.settled()
    assert call.seen[-1] == "speech_mark" and call.seen.index("speech_mark") >= 30
    await call.close()
