"""The realtime relay on a phone line: G.711 mu-law end to end (PROTOCOLS.md 1.3, 4).

A Twilio media transport at 8 kHz offers `send_wire_audio`; the session then configures
`audio/pcmu` both ways, appends the caller's own mu-law (the transport's decode, encoded
again, is exact: byte for byte what Twilio sent), and hands the model's mu-law deltas to
Twilio as they came: no resampling, no decode on the way out.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai import AsyncOpenAI

from tests.support.speech import spoken
from voicehub.agents.agent import Agent
from voicehub.hub import Hub
from voicehub.transports.twilio import TwilioMediaTransport
from voicehub.voice.audio import lin2ulaw, resample_pcm16
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime_session import RealtimeVoiceSession
from voicehub.voice.transport import plays_mulaw
from voicehub_dev.fakes.openai_realtime import FakeRealtimeServer, Say, Turn


class RecordingSocket:
    """Twilio's side of the media socket: the frames voicehub sends."""

    def __init__(self) -> None:
        self.frames: list[dict[str, object]] = []

    async def send_text(self, data: str) -> None:
        self.frames.append(json.loads(data))

    async def send_bytes(self, data: bytes) -> None:
        raise AssertionError("Twilio takes text frames only")

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        return None


def answer(turn: Turn) -> list[Say]:
    return [Say("Hello, how can I help?")] if turn.last.get("role") == "user" else []


@pytest.fixture
async def server() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer(brain=answer) as fake:
        yield fake


async def test_a_phone_call_is_relayed_as_mulaw_both_ways(server: FakeRealtimeServer) -> None:
    transport = TwilioMediaTransport("MZ1")
    assert plays_mulaw(transport)
    socket = RecordingSocket()
    pump = asyncio.create_task(transport.pump(socket))
    client = AsyncOpenAI(api_key="test-key", base_url=server.base_url)
    async with Hub() as hub:
        await hub.create_room("call-1", orchestration=None)
        session = RealtimeVoiceSession(
            hub,
            "call-1",
            Agent(id="desk", instructions="You answer the phone."),
            transport,
            client=client,
            settings=RealtimeSettings(silence_ms=300, transcription_model=None),
            attach_delivery=False,
        )
        await session.start()
        [update] = server.of_type("session.update")
        audio = update["session"]["audio"]
        assert audio["input"]["format"] == {"type": "audio/pcmu"}
        assert audio["output"]["format"] == {"type": "audio/pcmu"}

        caller = lin2ulaw(spoken("could you help me please", rate=8000) + bytes(16000))
        caller = caller[: len(caller) // 160 * 160]
        for at in range(0, len(caller), 160):  # as Twilio's media frames arrive
            await session.push_audio(transport.caller_audio(caller[at : at + 160]))
        await server.wait_for(lambda: transport.media_frames_sent >= 10)

        appended = b"".join(
            base64.b64decode(e["audio"]) for e in server.of_type("input_audio_buffer.append")
        )
        assert caller.startswith(appended) and len(appended) >= len(caller) - 960
        media = [f for f in socket.frames if f["event"] == "media"]
        payloads = [base64.b64decode(f["media"]["payload"]) for f in media]  # type: ignore[index]
        sent = b"".join(payloads)
        reply = await server.speech("Hello, how can I help?")
        agent_ulaw = lin2ulaw(resample_pcm16(reply, 24000, 8000))  # what the fake model sent
        assert agent_ulaw.startswith(sent)  # the model's mu-law, byte for byte
        assert {len(payload) for payload in payloads[:-1]} == {160}  # Twilio's 20 ms frames
        await session.aclose()
    transport.close()
    await pump


async def browser_session(
    hub: Hub, server: FakeRealtimeServer, transport: Any, room: str
) -> RealtimeVoiceSession:
    """A started relay session for a browser caller on `transport`, in a new room."""
    await hub.create_room(room, orchestration=None)
    session = RealtimeVoiceSession(
        hub,
        room,
        Agent(id="desk", instructions="You answer the browser."),
        transport,
        client=AsyncOpenAI(api_key="test-key", base_url=server.base_url),
        settings=RealtimeSettings(silence_ms=300, transcription_model=None),
        attach_delivery=False,
    )
    await session.start()
    return session


async def test_a_24_khz_browser_call_is_relayed_without_resampling(
    server: FakeRealtimeServer,
) -> None:
    """The model's own rate: the caller's PCM goes up as it came, the model's comes down."""
    from voicehub.testing import MemoryTransport

    transport = MemoryTransport(24000, ack="immediate")
    async with Hub() as hub:
        session = await browser_session(hub, server, transport, "call-2")
        [update] = server.of_type("session.update")
        assert update["session"]["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
        caller = spoken("could you help me please", rate=24000) + bytes(48000)
        caller = caller[: len(caller) // 960 * 960]
        for at in range(0, len(caller), 960):
            await session.push_audio(caller[at : at + 960])
        reply = await server.speech("Hello, how can I help?")
        await transport.wait_for(lambda: len(transport.audio) >= len(reply))
        appended = b"".join(
            base64.b64decode(e["audio"]) for e in server.of_type("input_audio_buffer.append")
        )
        assert caller.startswith(appended) and len(appended) >= len(caller) - 2 * 2880
        assert bytes(transport.audio[: len(reply)]) == reply  # byte for byte
        await session.aclose()


async def test_a_16_khz_browser_call_is_resampled_by_one_stream_each_way(
    server: FakeRealtimeServer,
) -> None:
    """The model's deltas come down through one 24 -> 16 kHz stream, byte for byte; the
    caller's batches go up through one 16 -> 24 kHz stream (soxr's dither makes a
    differently chunked stream differ by an LSB or two, no more)."""
    import numpy as np

    from voicehub.testing import MemoryTransport
    from voicehub.voice.realtime.pcm_resampler import PcmResampler
    from voicehub_dev.fakes.openai_realtime import DELTA_BYTES

    transport = MemoryTransport(16000, ack="immediate")
    async with Hub() as hub:
        session = await browser_session(hub, server, transport, "call-3")
        caller = spoken("could you help me please", rate=16000) + bytes(32000)
        caller = caller[: len(caller) // 640 * 640]
        for at in range(0, len(caller), 640):
            await session.push_audio(caller[at : at + 640])
        reply = await server.speech("Hello, how can I help?")
        down = PcmResampler(24000, 16000)
        played = b"".join(
            down.push(reply[at : at + DELTA_BYTES]) for at in range(0, len(reply), DELTA_BYTES)
        )
        await transport.wait_for(lambda: len(transport.audio) >= len(played))
        assert bytes(transport.audio[: len(played)]) == played  # byte for byte
        appended = b"".join(
            base64.b64decode(e["audio"]) for e in server.of_type("input_audio_buffer.append")
        )
        up = PcmResampler(16000, 24000).push(caller)
        assert len(up) - 2 * 5760 <= len(appended) <= len(up)
        sent = np.frombuffer(appended, dtype="<i2").astype(np.int32)
        expected = np.frombuffer(up[: len(appended)], dtype="<i2").astype(np.int32)
        assert int(np.abs(sent - expected).max()) <= 2
        await session.aclose()
