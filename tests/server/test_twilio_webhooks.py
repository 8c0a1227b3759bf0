"""The Twilio routes over real sockets with a scripted session (no models): signatures on
the webhooks, one-use and expiring stream tokens, and a stream that survives garbage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.core.clock import VirtualClock
from voicehub.desks.desk import Desk, load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import PhoneLine, caller_conversation
from voicehub_dev.fakes.server_session import ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio, sign

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "a" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret


@pytest.fixture
def factory() -> ScriptedStack:
    return ScriptedStack()


@pytest_asyncio.fixture
async def server(tmp_path: Path, factory: ScriptedStack) -> AsyncIterator[RunningServer]:
    desks: dict[str, Desk] = {"research": load_desks(CHANNELS)["research"]}
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
    )
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


def fake(server: RunningServer) -> FakeTwilio:
    return FakeTwilio(server.url, public_url=PUBLIC, auth_token=AUTH_TOKEN)


def phone(server: RunningServer) -> PhoneLine:
    line: PhoneLine = server.app.state.parts.phone
    return line


# -- signatures ---------------------------------------------------------------------------------


async def test_a_signed_call_gets_twiml_with_a_stream_and_its_parameters(
    server: RunningServer,
) -> None:
    answer = await fake(server).incoming_call("research", "+15550100003", "CA" + "1" * 32)
    assert answer.url == "wss://voicehub.test/twilio/research/stream"
    assert answer.parameters["conversation"] == caller_conversation(
        "+15550100003", NUMBER_KEY.encode()
    )
    assert "15550100003" not in answer.parameters["conversation"]  # hashed
    assert len(answer.parameters["token"]) >= 40
    conversation = answer.parameters["conversation"]
    status = f"https://voicehub.test/twilio/research/status?conversation={conversation}"
    assert answer.status_callback == status
    assert len(phone(server).tokens) == 0  # signed, not stored: any instance redeems it
    # This desk does not call back: the caller's number is not kept, not even in memory.
    room = f"research:{caller_conversation('+15550100003', NUMBER_KEY.encode())}"
    assert not server.app.state.parts.telephony.callbacks.knows(room)


@pytest.mark.parametrize(
    ("signature", "why"),
    [
        (None, "missing X-Twilio-Signature"),
        ("bm90IGEgc2lnbmF0dXJl", "does not match"),
        ("tampered", "does not match"),
    ],
)
async def test_a_bad_or_missing_signature_is_refused_and_nothing_runs(
    server: RunningServer, signature: str | None, why: str
) -> None:
    twilio = fake(server)
    params = twilio.call_params("+15550100004")
    if signature == "tampered":  # signed, then a field changed on the way
        signature = sign(AUTH_TOKEN, f"{PUBLIC}/twilio/research/voice", params)
        params = {**params, "From": "+15550199999"}
    response = await twilio.post("/twilio/research/voice", params, signature=signature)
    assert response.status_code == 403 and why in response.text
    assert len(phone(server).tokens) == 0


async def test_a_signature_for_another_url_or_token_is_refused(server: RunningServer) -> None:
    twilio = fake(server)
    params = twilio.call_params("+15550100005")
    for url, token in [
        (f"http://127.0.0.1:{server.port}/twilio/research/voice", AUTH_TOKEN),  # not public
        (f"{PUBLIC}/twilio/research/voice", "b" * 32),  # another account
    ]:
        response = await twilio.post(
            "/twilio/research/voice", params, signature=sign(token, url, params)
        )
        assert response.status_code == 403
    status = await twilio.post("/twilio/research/status", {"CallSid": "CA1"}, signature=None)
    assert status.status_code == 403
    signed = await twilio.post(
        "/twilio/research/status", {"CallSid": "CA1", "CallStatus": "completed"}
    )
    assert signed.status_code == 204
    assert len(phone(server).tokens) == 0


async def test_an_unknown_desk_is_404_after_the_signature(server: RunningServer) -> None:
    twilio = fake(server)
    response = await twilio.post("/twilio/nowhere/voice", twilio.call_params("+15550100006"))
    assert response.status_code == 404 and "nowhere" in response.text


# -- stream tokens ------------------------------------------------------------------------------


async def test_a_stream_token_works_once(server: RunningServer, factory: ScriptedStack) -> None:
    twilio = fake(server)
    answer = await twilio.incoming_call("research", "+15550100007")
    async with twilio.stream(answer, playout_speed=16.0) as first:
        await first.wait_quiet(0.2)  # the greeting came through
    assert len(factory.sessions) == 1
    async with twilio.stream(answer, hang_up=False) as replay:
        await asyncio.wait_for(replay.closed.wait(), 10)
    assert len(factory.sessions) == 1 and replay.media_frames() == 0


async def test_an_expired_stream_token_is_refused(
    server: RunningServer, factory: ScriptedStack
) -> None:
    clock = VirtualClock()
    phone(server).tokens.now = clock.now
    twilio = fake(server)
    answer = await twilio.incoming_call("research", "+15550100008")
    await clock.advance(61.0)
    async with twilio.stream(answer, hang_up=False) as late:
        await asyncio.wait_for(late.closed.wait(), 10)
    assert factory.sessions == [] and late.media_frames() == 0


async def test_a_stream_without_start_or_token_is_closed(server: RunningServer) -> None:
    url = f"{server.ws_url}/twilio/research/stream"
    async with connect(url) as ws:
        await ws.send('{"event": "connected", "protocol": "Call", "version": "1.0.0"}')
        start = {
            "event": "start",
            "streamSid": "MZ1",
            "start": {
                "streamSid": "MZ1",
                "callSid": "CA1",
                "customParameters": {"token": "forged"},
                "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
            },
        }
        await ws.send(json.dumps(start))
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        assert ws.close_code == 1008 and "unknown" in (ws.close_reason or "")


# -- garbage on a live stream -------------------------------------------------------------------


async def test_garbage_frames_are_dropped_and_the_call_goes_on(
    server: RunningServer, factory: ScriptedStack
) -> None:
    twilio = fake(server)
    async with twilio.stream(
        await twilio.incoming_call("research", "+15550100009"), playout_speed=16.0
    ) as line:
        await line.wait_quiet(0.2)
        [session] = factory.sessions
        sid = line.stream_sid
        for garbage in [
            "not json",
            "[1, 2]",
            '{"event": "hello"}',
            '{"event": "media", "streamSid": "MZ-other", "media": {"payload": ""}}',
            f'{{"event": "media", "streamSid": "{sid}", "media": {{"payload": "***"}}}}',
            f'{{"event": "mark", "streamSid": "{sid}"}}',
            f'{{"event": "dtmf", "streamSid": "{sid}", "dtmf": {{"digit": "xx"}}}}',
            '{"event": "start", "streamSid": "MZ2", "start": {}}',
        ]:
            await line.send(garbage)
        heard_before = len(session.caller_audio)
        await line.say(b"\x10\x00" * 1600, sample_rate=8000)  # 200 ms more of the caller

        await until(lambda: len(session.caller_audio) >= heard_before + 2 * 3200, timeout=10)
        room = f"research:{caller_conversation('+15550100009', NUMBER_KEY.encode())}"
        assert room in server.switchboard.calls
        said = len(session.said)
        await session.say("still here")  # and the agent is still heard, marks echoed
        assert len(session.said) == said + 1 and not line.closed.is_set()
