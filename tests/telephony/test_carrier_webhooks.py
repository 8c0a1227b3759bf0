"""The Telnyx, Plivo and Vonage routes over real sockets with a scripted session (no
models): each carrier's webhook signature is checked (a forged, stale or missing one gets
403 and nothing runs), the answer names the stream the carrier must open, its token lets
one stream in, once, and a stream survives garbage and ends on the carrier's hang-up."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.client.plivo import v3_signature
from voicehub.core.store.number_key import caller_conversation
from voicehub.desks.desk import Desk, load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.control import CarrierCallControl
from voicehub.telephony.settings import CarrierSettings
from voicehub.tools.call_control import live_calls
from voicehub_dev.fakes.carrier_rest import TELNYX_KEY, CarrierRest
from voicehub_dev.fakes.plivo import PlivoSide
from voicehub_dev.fakes.server_session import ScriptedStack
from voicehub_dev.fakes.telnyx import TelnyxSide
from voicehub_dev.fakes.vonage import VonageSide

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
NUMBER_KEY = "k" * 32
TELNYX_SEED = secrets.token_bytes(32)
PLIVO_TOKEN = "p" * 40
VONAGE_SECRET = "v" * 40


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    desks: dict[str, Desk] = {"research": load_desks(CHANNELS)["research"]}
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        number_key=NUMBER_KEY,
        carriers=CarrierSettings(
            telnyx_public_key=TelnyxSide(PUBLIC, PUBLIC, TELNYX_SEED).public_key,
            plivo_auth_token=PLIVO_TOKEN,
            vonage_signature_secret=VONAGE_SECRET,
        ),
    )
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as running:
        yield running


def fake(carrier: str, server: RunningServer) -> Any:
    if carrier == "telnyx":
        return TelnyxSide(server.url, PUBLIC, TELNYX_SEED)
    if carrier == "plivo":
        return PlivoSide(server.url, PUBLIC, PLIVO_TOKEN)
    return VonageSide(server.url, PUBLIC, VONAGE_SECRET)


CARRIERS = ["telnyx", "plivo", "vonage"]


@pytest.mark.parametrize("carrier", CARRIERS)
async def test_a_signed_call_gets_a_stream_whose_token_lets_one_stream_in(
    server: RunningServer, carrier: str
) -> None:
    caller = "+15550100021"
    answer = await fake(carrier, server).incoming_call("research", caller)
    assert answer.url.startswith(f"wss://voicehub.test/{carrier}/research/stream")
    assert answer.parameters["conversation"] == caller_conversation(caller, NUMBER_KEY.encode())
    room = f"research:{answer.parameters['conversation']}"
    async with fake(carrier, server).stream(answer, playout_speed=16.0) as line:
        await line.wait_quiet(0.5)  # the scripted greeting played, its mark confirmed
        assert line.played.marks and server.switchboard.calls[room].kind == carrier
        await line.press("5")
        await line.send("{not json")  # garbage is dropped; the call goes on
        await line.wait_quiet(0.2)
        assert room in server.switchboard.calls
    assert line.problems == []

    await until(
        lambda: room not in server.switchboard.calls, timeout=10
    )  # the carrier's hang-up ended the call
    record = await server.switchboard.hub.store.get_call(room)
    assert record is not None and not record.state.open

    # the same answer's token again: the stream is refused and closed
    async with fake(carrier, server).stream(answer, hang_up=False) as again:
        await asyncio.wait_for(again.closed.wait(), 10)
    assert room not in server.switchboard.calls


async def test_telnyx_refuses_forged_stale_and_unsigned_webhooks(server: RunningServer) -> None:
    telnyx = fake("telnyx", server)
    params = {"CallSid": "v3:abc", "From": "+15550100022", "To": "+15550009998"}
    body = urlencode(params).encode()
    forged = TelnyxSide(server.url, PUBLIC).signed(body)  # another account's key
    stale = telnyx.signed(body, timestamp=int(time.time()) - 3600)
    for headers in ({}, forged, stale):
        response = await telnyx.post("/telnyx/research/voice", params, headers=headers)
        assert response.status_code == 403, response.text
    assert "too old" in response.text
    assert server.switchboard.calls == {}


async def test_plivo_refuses_a_wrong_signature_or_url(server: RunningServer) -> None:
    plivo = fake("plivo", server)
    params = {"CallUUID": "c0ffee00-0000-4000-8000-000000000001", "From": "15550100023"}
    wrong_url = v3_signature(
        PLIVO_TOKEN, "https://elsewhere.test/plivo/research/answer", params, "n1"
    )
    for headers in (
        {},
        {"X-Plivo-Signature-V3": wrong_url, "X-Plivo-Signature-V3-Nonce": "n1"},
        {
            "X-Plivo-Signature-V3": v3_signature(
                "x" * 40, PUBLIC + "/plivo/research/answer", params, "n1"
            ),
            "X-Plivo-Signature-V3-Nonce": "n1",
        },
    ):
        response = await plivo.post("/plivo/research/answer", params, headers=headers)
        assert response.status_code == 403, response.text
    good = v3_signature(PLIVO_TOKEN, PUBLIC + "/plivo/research/answer", params, "n1")
    ok = await plivo.post(
        "/plivo/research/answer",
        params,
        headers={"X-Plivo-Signature-V3": f"bogus,{good}", "X-Plivo-Signature-V3-Nonce": "n1"},
    )
    assert ok.status_code == 200 and "<Stream" in ok.text  # any listed signature may match


async def test_vonage_refuses_a_jwt_under_another_secret_or_with_a_wrong_body_hash(
    server: RunningServer,
) -> None:
    query = urlencode({"uuid": "u-1", "from": "15550100024", "to": "15550009996"})
    url = f"{server.url}/vonage/research/answer?{query}"
    other = VonageSide(server.url, PUBLIC, "w" * 40).token()
    old = jwt.encode({"iat": int(time.time()) - 3600, "api_key": "k"}, VONAGE_SECRET, "HS256")
    async with httpx.AsyncClient(timeout=10) as client:
        for headers in (
            {},
            {"Authorization": f"Bearer {other}"},
            {"Authorization": f"Bearer {old}"},
        ):
            assert (await client.get(url, headers=headers)).status_code == 403
        body = b'{"status":"answered"}'
        claims = {"iat": int(time.time()), "payload_hash": hashlib.sha256(b"other").hexdigest()}
        token = jwt.encode(claims, VONAGE_SECRET, "HS256")
        event = await client.post(
            f"{server.url}/vonage/research/event",
            content=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert event.status_code == 403 and "payload_hash" in event.text
        signed = VonageSide(server.url, PUBLIC, VONAGE_SECRET).token(body)
        event = await client.post(
            f"{server.url}/vonage/research/event",
            content=body,
            headers={"Authorization": f"Bearer {signed}"},
        )
        assert event.status_code == 204


async def test_a_telnyx_call_gets_the_carrier_control_that_reaches_its_rest_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with CarrierRest(vonage_public_key="") as rest:
        monkeypatch.setenv("SSL_CERT_FILE", str(rest.cert))  # the SDK trusts the fake's cert
        desks: dict[str, Desk] = {"research": load_desks(CHANNELS)["research"]}
        settings = ServerSettings(
            channels_dir=CHANNELS,
            db_path=tmp_path / "voicehub.db",
            public_url=PUBLIC,
            number_key=NUMBER_KEY,
            carriers=CarrierSettings(
                telnyx_public_key=TelnyxSide(PUBLIC, PUBLIC, TELNYX_SEED).public_key,
                telnyx_api_key=TELNYX_KEY,
                telnyx_api_url=rest.url + "/v2",
            ),
        )
        factory = ScriptedStack()
        async with running_server(settings, voice=factory, desks=desks) as server:
            telnyx = fake("telnyx", server)
            answer = await telnyx.incoming_call("research", "+15550100025")
            room = f"research:{answer.parameters['conversation']}"
            async with telnyx.stream(answer, playout_speed=16.0) as line:
                await line.wait_quiet(0.5)
                control = live_calls(server.switchboard.hub).get(room)
                assert isinstance(control, CarrierCallControl) and control.kind == "telnyx"
                assert await control.send_digits("12#") == "Pressing 1 2 #."

                await until(lambda: rest.requests, timeout=10)
    assert rest.requests == [("telnyx", "send_digits", answer.call_id, {"digits": "12#"})]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/twilio/research/status", "application/x-www-form-urlencoded"),
        ("/telnyx/research/status", "application/x-www-form-urlencoded"),
        ("/plivo/research/status", "application/x-www-form-urlencoded"),
        ("/vonage/research/event", "application/json"),
        ("/desks/research/webrtc", "application/sdp"),
    ],
)
async def test_a_sender_gone_mid_body_is_no_server_error(
    server: RunningServer, path: str, kind: str
) -> None:
    """A carrier whose status callback is cut as its call ends (or a browser closing
    mid-offer) sends half a body: the server logs that the sender went away, raises
    nothing (no "Exception in ASGI application" traceback), and goes on answering."""
    seen = _Records()
    watched = [logging.getLogger(name) for name in ("uvicorn.error", "voicehub")]
    levels = [logger.level for logger in watched]
    for logger in watched:
        logger.addHandler(seen)
        logger.setLevel(logging.INFO)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\n"
        writer.write(f"{head}Content-Length: 1000\r\n\r\nCallSid=CA1&".encode())
        await writer.drain()
        writer.close()  # gone before the other 988 bytes
        await writer.wait_closed()
        del reader
        went_away = await until(
            lambda: [r for r in seen.records if "went away" in r.getMessage()],
            what=f"the server noting that the sender of {path} went away",
            timeout=10,
        )
    finally:
        for logger, level in zip(watched, levels, strict=True):
            logger.removeHandler(seen)
            logger.setLevel(level)
    assert path in went_away[0].getMessage()
    assert [r.getMessage() for r in seen.records if r.levelno >= logging.ERROR] == []
    async with httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get("/health")).status_code == 200
