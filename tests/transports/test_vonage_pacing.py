"""Vonage's playback buffer is bounded (3072 frames, about a minute): agent speech longer
than that is paced at 20 ms a frame, all of it plays, and a barge-in still clears at once.
On the virtual clock; Vonage's side is the fake's dialect (`voicehub.client.vonage`) over a
model of its buffer."""

from __future__ import annotations

import asyncio
import json

import pytest

from voicehub.client.carrier_answers import StreamAnswer
from voicehub.client.vonage import BUFFER_MESSAGES, VonageDialect
from voicehub.core.clock import Clock, VirtualClock
from voicehub.transports.phone import PhoneStreamTransport
from voicehub.transports.phone_pacing import PlayoutPacer
from voicehub.transports.vonage import PLAYOUT_LEAD, VonageCodec

FRAME = 640  # 20 ms of PCM16 at 16 kHz
CONNECTED = json.dumps(
    {"event": "websocket:connected", "content-type": "audio/l16;rate=16000", "call_uuid": "U1"}
)


class VonageSocket:
    """Vonage's end of the socket: it reads our frames as its dialect does, buffers at most
    3072 frames of audio, plays one every 20 ms of the clock from the first, answers a
    notify once the audio before it played, and empties the buffer on a clear."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.dialect = VonageDialect(StreamAnswer("wss://x", {}, "U1", "+1555"))
        self.played_until = clock.now()  # when the buffered audio will have played
        self.received = 0
        self.lost = 0
        self.most_buffered = 0
        self.clears = 0
        self.notified: list[tuple[str, float]] = []
        self.problems: list[str] = []

    def buffered(self) -> int:
        return round(max(0.0, self.played_until - self.clock.now()) / 0.02)

    async def send_bytes(self, data: bytes) -> None:
        for kind, _ in self.dialect.heard(data):
            assert kind == "audio", self.dialect.heard(data)
            self.received += 1
            if self.buffered() >= BUFFER_MESSAGES:
                self.lost += 1
                continue
            self.played_until = max(self.played_until, self.clock.now()) + 0.02
            self.most_buffered = max(self.most_buffered, self.buffered())

    async def send_text(self, data: str) -> None:
        for kind, value in self.dialect.heard(data):
            if kind == "mark":
                self.notified.append((str(value), max(self.played_until, self.clock.now())))
            elif kind == "clear":
                self.clears += 1
                self.played_until = self.clock.now()
            else:
                self.problems.append(str(value))

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        return None


async def call(
    clock: VirtualClock,
) -> tuple[PhoneStreamTransport, VonageSocket, asyncio.Task[None]]:
    codec = VonageCodec()
    codec.read(CONNECTED)
    transport = PhoneStreamTransport(codec, sample_rate=16000, clock=clock)
    vonage = VonageSocket(clock)
    pump = asyncio.create_task(transport.pump(vonage))
    return transport, vonage, pump


async def test_speech_past_vonages_buffer_is_paced_and_all_of_it_plays() -> None:
    clock = VirtualClock()
    transport, vonage, pump = await call(clock)
    await transport.send_audio(bytes(FRAME * 4500))  # 90 s, as fast as a TTS makes it
    await transport.mark("s1")
    await clock.advance(0)
    assert vonage.received == PLAYOUT_LEAD / 0.02  # the lead goes at once, the rest waits
    for _ in range(95):
        await clock.advance(1.0)
    assert (vonage.received, vonage.lost) == (4500, 0)
    assert vonage.most_buffered <= PLAYOUT_LEAD / 0.02 < BUFFER_MESSAGES
    [(name, played_at)] = vonage.notified
    assert name == "s1" and played_at == pytest.approx(90.0, abs=0.05)
    assert vonage.problems == []
    transport.close()
    await pump


async def test_a_barge_in_clears_at_once_while_audio_is_paced() -> None:
    clock = VirtualClock()
    transport, vonage, pump = await call(clock)
    await transport.send_audio(bytes(FRAME * 4500))
    await transport.mark("s1")
    await clock.advance(30.0)
    assert 0 < len(transport.queued()) < 4500
    await transport.clear()
    await clock.advance(0)  # the clear does not wait behind the paced audio
    assert vonage.clears == 1 and transport.queued() == []
    sent = vonage.received
    await transport.send_audio(bytes(FRAME * 100))  # the next reply: the buffer is empty again
    await clock.advance(0)
    assert vonage.received == sent + 100 and vonage.lost == 0
    transport.close()
    await pump


async def test_unpaced_audio_overflows_vonages_buffer() -> None:
    # What the pacing prevents: the fake's buffer loses what is past its 3072 frames.
    clock = VirtualClock()
    vonage = VonageSocket(clock)
    for _ in range(4500):
        await vonage.send_bytes(bytes(FRAME))
    assert vonage.lost == 4500 - BUFFER_MESSAGES


def test_a_pacer_lead_shorter_than_a_frame_is_refused() -> None:
    with pytest.raises(ValueError, match="shorter than one frame"):
        PlayoutPacer(VirtualClock(), lead=0.01, is_audio=lambda frame: True)
