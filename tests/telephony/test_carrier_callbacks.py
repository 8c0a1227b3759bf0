"""Call-backs on Telnyx, Plivo and Vonage over real sockets with a scripted session: the
caller hangs up, a result is held, and the carrier the caller came in on is asked (through
its official SDK, against a fake of its REST API) to call back from the number they called;
the carrier's fake then reports a missed call, then answers the next one as that carrier
does (signed webhooks, the answer's stream), and the held result is spoken once. Attempt
delays run on a virtual clock."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.e2e_helpers import RunningServer, running_server
from voicehub.client.carrier_answers import StreamAnswer
from voicehub.client.plivo import parse_plivo_xml
from voicehub.client.telnyx import parse_texml
from voicehub.client.vonage import parse_ncco
from voicehub.core.clock import VirtualClock
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.callback import CallBacks
from voicehub.telephony.settings import CarrierSettings
from voicehub_dev.fakes.carrier_rest import PLIVO_ID, PLIVO_TOKEN, TELNYX_KEY, CarrierRest
from voicehub_dev.fakes.plivo import PlivoSide
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack
from voicehub_dev.fakes.telnyx import TelnyxSide
from voicehub_dev.fakes.vonage import VonageSide

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
NUMBER_KEY = "k" * 32
VONAGE_SECRET = "v" * 40
TELNYX_SEED = secrets.token_bytes(32)
DELAY = 30.0
RESULT = "Solar panels pay back in about ten years."
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PRIVATE_PEM = KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()
PUBLIC_PEM = (
    KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)
CALLER = {"telnyx": "+15550100301", "plivo": "+15550100302", "vonage": "+15550100303"}
CALLED = {"telnyx": "+15550009998", "plivo": "15550009997", "vonage": "15550009996"}


def channels_with_callback(tmp: Path) -> Path:
    text = (CHANNELS / "research.toml").read_text()
    phone = f"\n[phone]\ncallback = true\ncallback_attempts = 3\ncallback_delay = {DELAY}\n"
    phone += 'voicemail = "Hello, this is {desk} calling back about {topics}."\n'
    desks = tmp / "channels"
    shutil.copytree(CHANNELS, desks)
    (desks / "research.toml").write_text(text + phone)
    return desks


@dataclass
class Line:
    server: RunningServer
    rest: CarrierRest
    clock: VirtualClock
    carrier: str

    @property
    def callbacks(self) -> CallBacks:
        found: CallBacks = self.server.app.state.parts.telephony.callbacks
        return found

    @property
    def factory(self) -> ScriptedStack:
        found: ScriptedStack = self.server.switchboard.lifecycle.voice  # type: ignore[assignment]
        return found

    def fake(self) -> Any:
        if self.carrier == "telnyx":
            return TelnyxSide(self.server.url, PUBLIC, TELNYX_SEED)
        if self.carrier == "plivo":
            return PlivoSide(self.server.url, PUBLIC, PLIVO_TOKEN)
        return VonageSide(self.server.url, PUBLIC, VONAGE_SECRET)

    async def session_after(self, count: int) -> ScriptedSession:
        async def live() -> None:
            while len(self.factory.sessions) <= count:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # polling the factory, not waiting for time

        await asyncio.wait_for(live(), 10)
        return self.factory.sessions[count]

    async def call_and_hang_up(self) -> str:
        """Call in, hang up once the greeting played; the call's room."""
        phone = self.fake()
        sessions = len(self.factory.sessions)
        answer = await phone.incoming_call("research", CALLER[self.carrier])
        async with phone.stream(answer, playout_speed=16.0) as line:
            session = await self.session_after(sessions)
            await line.wait_quiet(0.2)
            room = session.room_id
        call = self.server.switchboard.calls.get(room)
        if call is not None:
            await asyncio.wait_for(call.finished.wait(), 10)
        return room

    async def next_dial(self, seen: int) -> tuple[str, dict[str, Any]]:
        """Let the delay pass; the call-back the carrier was asked to place (its attempt)."""
        await self.clock.advance(DELAY)

        async def dialled() -> None:
            while len([r for r in self.rest.requests if r[1] == "dial"]) <= seen:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # polling the fake's log, not waiting for time

        await asyncio.wait_for(dialled(), 20)
        body = [r for r in self.rest.requests if r[1] == "dial"][seen][3]
        url = {"telnyx": body.get("Url"), "plivo": body.get("answer_url")}.get(
            self.carrier, (body.get("answer_url") or [""])[0]
        )
        return urlsplit(url).path.rsplit("/", 1)[1], body

    async def outcome(self, seen: int) -> str:
        async def done() -> None:
            while len(self.callbacks.history) <= seen:
                self.callbacks.changed.clear()
                await self.callbacks.changed.wait()

        await asyncio.wait_for(done(), 20)
        return self.callbacks.history[seen][1]

    async def missed(self, attempt: str) -> None:
        """The carrier reports the call-back rang out, in its own words."""
        phone, base = self.fake(), f"/{self.carrier}/research/callback/{attempt}"
        if self.carrier == "telnyx":
            response = await phone.post(
                base + "/status", {"CallSid": "v3:x", "CallStatus": "no-answer"}
            )
        elif self.carrier == "plivo":
            response = await phone.post(
                base + "/hangup", {"CallUUID": "u", "CallStatus": "timeout"}
            )
        else:
            body = json.dumps({"uuid": "u", "status": "unanswered"}).encode()
            response = await vonage_post(phone, base + "/event", body)
        assert response.status_code == 204

    async def answer(self, attempt: str, answered_by: str = "human") -> StreamAnswer | str:
        """The callee picks up: the carrier fetches the call-back's answer; its stream (or
        the answer's text when it is not one)."""
        phone, base = self.fake(), f"/{self.carrier}/research/callback/{attempt}"
        caller = CALLER[self.carrier]
        if self.carrier == "telnyx":
            call_id = "v3:" + secrets.token_hex(8)
            params = {"CallSid": call_id, "AnsweredBy": answered_by, "CallStatus": "in-progress"}
            response = await phone.post(base, params)
            response.raise_for_status()
            if "<Stream" not in response.text:
                return response.text
            return parse_texml(response.text, call_id, caller)
        if self.carrier == "plivo":
            call_id = secrets.token_hex(8)
            response = await phone.post(base, {"CallUUID": call_id, "CallStatus": "in-progress"})
            response.raise_for_status()
            return parse_plivo_xml(response.text, call_id, caller)
        call_id = secrets.token_hex(8)
        url = phone.local(phone.public(f"{base}?{urlencode({'uuid': call_id})}"))
        async with httpx_client() as client:
            response = await client.get(url, headers={"Authorization": f"Bearer {phone.token()}"})
        response.raise_for_status()
        return parse_ncco(response.json(), call_id, caller)


def httpx_client() -> Any:
    import httpx

    return httpx.AsyncClient(timeout=10)


async def vonage_post(phone: VonageSide, path: str, body: bytes) -> Any:
    headers = {"Authorization": f"Bearer {phone.token(body)}", "content-type": "application/json"}
    async with httpx_client() as client:
        return await client.post(phone.local(phone.public(path)), content=body, headers=headers)


@pytest_asyncio.fixture(params=["telnyx", "plivo", "vonage"])
async def line(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Line]:
    carrier: str = request.param
    channels = channels_with_callback(tmp_path)
    async with CarrierRest(PUBLIC_PEM) as rest:
        monkeypatch.setenv("SSL_CERT_FILE", str(rest.cert))  # the SDKs trust the fake's certificate
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(rest.cert))
        carriers = CarrierSettings(
            telnyx_public_key=TelnyxSide(PUBLIC, PUBLIC, TELNYX_SEED).public_key,
            telnyx_api_key=TELNYX_KEY,
            telnyx_api_url=rest.url + "/v2",
            telnyx_account_sid="account-1",
            telnyx_application_id="texml-app-1",
            plivo_auth_id=PLIVO_ID,
            plivo_auth_token=PLIVO_TOKEN,
            plivo_api_url=rest.url,
            vonage_signature_secret=VONAGE_SECRET,
            vonage_application_id="app-1",
            vonage_private_key=PRIVATE_PEM,
            vonage_api_url=rest.url,
        )
        settings = ServerSettings(
            channels_dir=channels,
            db_path=tmp_path / "voicehub.db",
            public_url=PUBLIC,
            number_key=NUMBER_KEY,
            carriers=carriers,
        )
        clock = VirtualClock()
        desks = {"research": load_desks(channels)["research"]}
        async with running_server(
            settings, voice=ScriptedStack(), desks=desks, phone_clock=clock
        ) as server:
            yield Line(server, rest, clock, carrier)


@pytest.mark.slow
async def test_a_missed_call_back_then_an_answered_one_speaks_the_result_once(line: Line) -> None:
    room = await line.call_and_hang_up()
    delivery = line.server.switchboard.hub.delivery
    delivery_id = await delivery.deliver(room, RESULT)
    assert [r.status for r in delivery.pending(room)] == ["held"]
    assert line.callbacks.knows(room)

    attempt, body = await line.next_dial(0)
    to, from_ = CALLER[line.carrier], CALLED[line.carrier]
    if line.carrier == "telnyx":
        assert (body["To"], body["From"]) == (to, from_)
    elif line.carrier == "plivo":
        assert (body["to"], body["from"]) == (to.lstrip("+"), from_)
    else:
        assert body["to"] == [{"type": "phone", "number": to.lstrip("+")}]
        assert body["from"] == {"type": "phone", "number": from_}
    await line.missed(attempt)
    assert await line.outcome(0) == "no-answer"
    assert [r.status for r in delivery.pending(room)] == ["held"]

    attempt, _ = await line.next_dial(1)
    sessions = len(line.factory.sessions)
    answer = await line.answer(attempt)
    assert isinstance(answer, StreamAnswer)
    assert await line.outcome(1) == "answered"
    async with line.fake().stream(answer, playout_speed=16.0) as phone:
        session = await line.session_after(sessions)

        async def spoken() -> None:
            while RESULT not in session.said:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # polling the scripted session, not waiting for time

        await asyncio.wait_for(spoken(), 10)
        await phone.wait_quiet(0.2)
    assert session.room_id == room and phone.problems == []
    record = await line.server.switchboard.hub.store.get_delivery(delivery_id)
    assert record is not None and (record.status, record.attempts) == ("delivered", 1)
    await line.clock.advance(10 * DELAY)  # nothing is held: no further call
    assert len([r for r in line.rest.requests if r[1] == "dial"]) == 2


@pytest.mark.parametrize("line", ["telnyx"], indirect=True)
async def test_a_telnyx_machine_gets_the_voicemail_once(line: Line) -> None:
    room = await line.call_and_hang_up()
    await line.server.switchboard.hub.delivery.deliver(room, RESULT, metadata={"task": "solar"})
    attempt, _ = await line.next_dial(0)
    texml = await line.answer(attempt, answered_by="machine_end_beep")
    assert texml == (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Hello, this is Research desk '
        "calling back about solar.</Say><Hangup/></Response>"
    )
    assert await line.outcome(0) == "voicemail"
    await line.clock.advance(10 * DELAY)  # the message is left once
    assert len([r for r in line.rest.requests if r[1] == "dial"]) == 1
    pending = line.server.switchboard.hub.delivery.pending(room)
    assert [r.status for r in pending] == ["held"]
