"""A server at its limit refuses new calls busy, each transport in its own words, and says so
on `/ready`; a call coming back (a reconnect, Twilio's redirect) is still let in, so every
admitted call is answered to its end."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.e2e_helpers import RunningServer, running_server
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import load_desks
from voicehub.errors import VoicehubError
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import CallError
from voicehub.voice.providers.offline.recognizer_load import RecognizerLoad
from voicehub_dev.fakes.server_session import ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
AUTH_TOKEN = "a" * 32


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        max_calls=1,
        public_url="https://voicehub.test",
        twilio_auth_token=AUTH_TOKEN,
    )
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as run:
        yield run


def options(server: RunningServer, conversation: str) -> CallOptions:
    return CallOptions(
        desk="research",
        server=server.url,
        conversation=conversation,
        realtime=False,
        playout_speed=math.inf,
        quiet=0.2,
    )


@pytest.mark.slow
async def test_a_server_at_its_call_limit_refuses_new_calls_busy_on_every_transport(
    server: RunningServer,
) -> None:
    async with CallClient(options(server, "first")) as first:
        await first.wait_for_turn()
        ready = await server.get("/ready")
        assert ready.status_code == 503 and ready.json()["reason"] == "busy"

        refused = CallClient(options(server, "second"))
        with pytest.raises(VoicehubError, match=r"refused \(1013\).*busy"):
            await refused.connect()
        await refused.close()
        [error] = refused.report.events_of(CallError)
        assert error.code == "busy" and "at its limit of 1 calls" in error.message

        async with httpx.AsyncClient(base_url=server.url) as client:
            offer = await client.post(
                "/desks/research/webrtc",
                content=b"v=0",
                headers={"content-type": "application/sdp"},
            )
        assert offer.status_code == 503 and offer.headers["retry-after"] == "2"
        assert "busy" in offer.text

        twilio = FakeTwilio(server.url, "https://voicehub.test", AUTH_TOKEN)
        rejected = await twilio.post("/twilio/research/voice", twilio.call_params("+15550100001"))
        assert rejected.status_code == 200
        assert '<Response><Reject reason="busy"/></Response>' in rejected.text
        # a call coming back is not a new call: Twilio's redirect is answered
        back = await twilio.post(
            "/twilio/research/voice?resume=1", twilio.call_params("+15550100001")
        )
        assert back.status_code == 200 and "<Reject" not in back.text

    ready = await server.get("/ready")  # the call is over: room again
    assert ready.status_code == 200
    async with CallClient(options(server, "third")) as third:
        await third.wait_for_turn()
        assert third.report.resumed is False


async def test_the_servers_load_counts_its_offline_recognizers(tmp_path: Path) -> None:
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db", max_load=0.8)
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as run:
        meter = run.app.state.parts.admission.meter
        assert isinstance(meter.parts["recognizers"], RecognizerLoad)
        assert "recognizers" in meter.shares()
        # the decoders saturated, the process itself idle: a new call is refused busy
        meter.parts["recognizers"] = lambda: 0.95
        refused = CallClient(options(run, "second"))
        with pytest.raises(VoicehubError, match=r"refused \(1013\).*busy"):
            await refused.connect()
        await refused.close()
        [error] = refused.report.events_of(CallError)
        assert error.code == "busy" and "recognizers at 0.95" in error.message
