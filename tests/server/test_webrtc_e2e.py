"""End to end over WebRTC on the embedded stack: real uvicorn and real aiortc peers on
127.0.0.1 (the server's and `voicehub call --webrtc`'s), Opus both ways, caller speech
synthesized by Piper, Silero VAD and PocketSphinx on the server, the research desk.

The agent's audio arrives in real time on the track (WebRTC paces it); the client acks each
speech mark on the data channel once the audio before it has arrived and "played", so the
result is spoken only after the data-channel ack of the agent's previous speech.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, brief_research_desk, running_server
from tests.server.test_e2e import (
    HEAT_PUMP_WORDS,
    RESEARCH,
    check_result_waited_for_idle,
    heard_keywords,
    recognized,
    result_segments,
)
from tests.support.speech import spoken
from tests.webrtc_helpers import loopback_ice
from voicehub.client.call import CallClient, CallOptions, place_call
from voicehub.client.report import format_summary, format_timeline
from voicehub.client.webrtc import WebRTCLink
from voicehub.desks.desk import Desk
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import (
    CallError,
    CallSession,
    DeliveryOutcome,
    TaskFinished,
    ToolCall,
    Transcript,
)

pytest.importorskip("aiortc")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
SILENCE_TIMEOUT = 3.0


@pytest.fixture(scope="module", autouse=True)
def loopback() -> Iterator[None]:
    with loopback_ice():
        yield


@pytest.fixture(scope="module")
def request_audio() -> bytes:
    return spoken(RESEARCH)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    desks: dict[str, Desk] = {"research": brief_research_desk()}
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path_factory.mktemp("webrtc") / "voicehub.db",
        webrtc_silence_timeout=SILENCE_TIMEOUT,
    )
    factory = default_voice_stacks()
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


def options(server: RunningServer, conversation: str) -> CallOptions:
    return CallOptions(
        desk="research",
        server=server.url,
        conversation=conversation,
        webrtc=True,
        playout_speed=16.0,
        quiet=0.5,
    )


async def test_research_by_webrtc_is_delegated_and_spoken_after_the_data_channel_ack(
    server: RunningServer, request_audio: bytes
) -> None:
    report = await place_call(options(server, "rtc-research"), [(RESEARCH, request_audio)])
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")
    assert report.settled

    heard = [e.text for e in report.events_of(Transcript) if e.role == "user"][-1]
    assert "research" in heard and ("heat" in heard or "pump" in heard)
    [tool] = report.events_of(ToolCall)
    assert tool.name == "delegate_workers" and "pump" in json.loads(tool.arguments)["task"]
    assert [e.status for e in report.events_of(TaskFinished)] == ["ok", "ok"]
    [delivery] = report.events_of(DeliveryOutcome)  # delivered once
    assert (delivery.outcome, delivery.strategy) == ("delivered", "wait_for_idle")
    segments = result_segments(report, str(delivery.delivery_id))
    # the agent's previous speech was acked on the data channel before the result started
    check_result_waited_for_idle(report, segments)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=4)
    assert all(0 < latency < 5 for latency in report.latencies())
    found = await server.get("/api/deliveries", params={"room": report.room_id})
    [stored] = found.json()["deliveries"]
    assert (stored["status"], stored["attempts"]) == ("delivered", 1)


async def test_a_caller_who_goes_silent_is_dropped_and_hears_the_result_on_calling_back(
    server: RunningServer, request_audio: bytes
) -> None:
    room = "research:rtc-silent"
    call = CallClient(options(server, "rtc-silent"))
    await call.connect()
    try:
        await call.wait_for_turn()
        await call.say(request_audio, RESEARCH)
        await call.wait_for(lambda: len(call.report.events_of(TaskFinished)) == 2, 30)
        # The network goes: no more RTP from the caller, no goodbye, no DELETE.
        link = call._ws
        assert isinstance(link, WebRTCLink)
        for sender in link.connection.getSenders():
            sender.track.stop()  # the sender sees the track end and stops sending
        await asyncio.wait_for(call._closed.wait(), SILENCE_TIMEOUT + 10)
    finally:
        await call.close()
    [gone] = call.report.events_of(CallError)  # the data channel still carried the reason
    assert gone.code == "closed_1001" and "no audio from the caller" in gone.message

    async def held() -> list[dict[str, Any]]:
        while True:
            found = await server.get("/api/deliveries", params={"room": room})
            deliveries: list[dict[str, Any]] = found.json()["deliveries"]
            if deliveries and deliveries[0]["status"] == "held":
                return deliveries
            await asyncio.sleep(0.05)

    [waiting] = await asyncio.wait_for(held(), 30)
    assert room not in server.switchboard.calls

    async with CallClient(options(server, "rtc-silent")) as back:
        assert back.report.events_of(CallSession)[0].resumed
        delivered = await back.wait_for_event(
            DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=60
        )
        assert await back.settle(30)
        await back.hangup()
    assert delivered.delivery_id == waiting["id"]
    segments = result_segments(back.report, waiting["id"])
    heard_keywords(await recognized(back.report, segments), HEAT_PUMP_WORDS, at_least=4)
