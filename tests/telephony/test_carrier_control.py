"""Each carrier's call control through its official SDK against a fake of its REST API
(HTTPS on 127.0.0.1): hang-up, cold transfer and keypad tones on a call, and a call that
has ended refused the way the carrier refuses it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from voicehub.telephony.callback import DialBack
from voicehub.telephony.control import CarrierCallError, CarrierCalls
from voicehub.telephony.plivo.control import PlivoCalls
from voicehub.telephony.telnyx.control import TelnyxCalls
from voicehub.telephony.vonage.control import VonageCalls
from voicehub_dev.fakes.carrier_rest import PLIVO_ID, PLIVO_TOKEN, TELNYX_KEY, CarrierRest

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PRIVATE_PEM = KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
).decode()
PUBLIC_PEM = (
    KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


@pytest_asyncio.fixture
async def rest(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[CarrierRest]:
    async with CarrierRest(PUBLIC_PEM) as running:
        # the SDKs (httpx for Telnyx, requests for Plivo and Vonage) trust the test's certificate
        monkeypatch.setenv("SSL_CERT_FILE", str(running.cert))
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(running.cert))
        yield running


def calls_of(carrier: str, rest: CarrierRest) -> CarrierCalls:
    public = lambda path: "https://voicehub.test" + path  # noqa: E731
    if carrier == "telnyx":
        return TelnyxCalls(
            TELNYX_KEY,
            public,
            api_url=rest.url + "/v2",
            account_sid="account-1",
            application_id="texml-app-1",
        )
    if carrier == "plivo":
        return PlivoCalls(PLIVO_ID, PLIVO_TOKEN, public, api_url=rest.url)
    return VonageCalls("app-1", PRIVATE_PEM, public, api_url=rest.url)


@pytest.mark.slow
@pytest.mark.parametrize("carrier", ["telnyx", "plivo", "vonage"])
async def test_keypad_tones_then_a_transfer_then_the_call_is_over(
    rest: CarrierRest, carrier: str
) -> None:
    calls = calls_of(carrier, rest)
    try:
        await calls.send_digits("call-1", "12w#")
        await calls.transfer("call-1", "+15550001111", desk="research")
        with pytest.raises(CarrierCallError):  # the caller left us: the call is gone
            await calls.hang_up("call-1")
        await calls.hang_up("call-2")
    finally:
        await calls.aclose()
    done = [(action, call) for name, action, call, _ in rest.requests if name == carrier]
    assert done == [("send_digits", "call-1"), ("transfer", "call-1"), ("hangup", "call-2")]
    digits, transfer = rest.requests[0][3], rest.requests[1][3]
    if carrier == "telnyx":
        assert digits == {"digits": "12w#"} and transfer["to"] == "+15550001111"
    elif carrier == "plivo":
        assert transfer["aleg_url"] == "https://voicehub.test/plivo/research/dial?to=%2B15550001111"
    else:
        assert digits == {"digits": "12p#"}  # Vonage's pause is "p"
        [connect] = transfer["destination"]["ncco"]
        assert connect["action"] == "connect"
        assert connect["endpoint"] == [{"type": "phone", "number": "15550001111"}]
        assert connect["randomFromNumber"] is True


@pytest.mark.parametrize("carrier", ["telnyx", "plivo", "vonage"])
async def test_a_call_back_is_placed_from_the_number_called_with_machine_detection(
    rest: CarrierRest, carrier: str
) -> None:
    calls = calls_of(carrier, rest)
    try:
        placed = await calls.dial_back(DialBack("A1", "research", "+15550100011", "+15550009998"))
    finally:
        await calls.aclose()
    [(name, action, call_id, body)] = rest.requests
    assert (name, action, placed) == (carrier, "dial", call_id if carrier != "telnyx" else placed)
    base = f"https://voicehub.test/{carrier}/research/callback/A1"
    if carrier == "telnyx":
        assert (body["To"], body["From"], body["ApplicationSid"]) == (
            "+15550100011",
            "+15550009998",
            "texml-app-1",
        )
        assert (body["Url"], body["StatusCallback"]) == (base, base + "/status")
        assert body["MachineDetection"] == "DetectMessageEnd"
    elif carrier == "plivo":
        assert (body["to"], body["from"]) == ("15550100011", "15550009998")
        assert (body["answer_url"], body["hangup_url"]) == (base, base + "/hangup")
        assert body["machine_detection"] == "hangup"
    else:
        assert body["to"] == [{"type": "phone", "number": "15550100011"}]
        assert body["from"] == {"type": "phone", "number": "15550009998"}
        assert (body["answer_url"], body["event_url"]) == ([base], [base + "/event"])
        assert body["machine_detection"] == "hangup"


async def test_a_telnyx_call_back_needs_the_texml_account_and_application() -> None:
    calls = TelnyxCalls(TELNYX_KEY, lambda path: "https://voicehub.test" + path)
    try:
        with pytest.raises(CarrierCallError, match="TELNYX_ACCOUNT_SID and TELNYX_APPLICATION_ID"):
            await calls.dial_back(DialBack("A1", "research", "+15550100011", "+15550009998"))
    finally:
        await calls.aclose()
