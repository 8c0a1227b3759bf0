"""Vonage call control on the official SDK (`vonage_voice.Voice`): hang-up, cold transfer
(an NCCO `connect` to the target) and keypad tones on a call's uuid, and call-backs
(`create_call` with `machine_detection="hangup"`: Vonage ends a call a machine answered; no
voicemail is left).

The REST API is authenticated by a JWT (RS256) the SDK makes from the application's id and
private key (`VONAGE_APPLICATION_ID`, `VONAGE_PRIVATE_KEY`: PEM text or a path to it).
`VONAGE_API_URL` replaces the API's host. The SDK is synchronous: each call runs in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from voicehub.errors import ConfigError, MissingExtraError
from voicehub.telephony.callback import DialBack
from voicehub.telephony.control import CarrierCallError

__all__ = ["VonageCalls", "private_key_text"]


def private_key_text(value: str) -> str:
    """The PEM text of `VONAGE_PRIVATE_KEY` (the text itself, or a path to the file)."""
    if "-----BEGIN" in value:
        return value
    path = Path(value).expanduser()
    try:
        return path.read_text()
    except OSError as exc:
        raise ConfigError(f"VONAGE_PRIVATE_KEY: cannot read {path}: {exc}") from None


class VonageCalls:
    """`CarrierCalls` for Vonage."""

    carrier = "vonage"

    def __init__(
        self,
        application_id: str,
        private_key: str,
        public: Callable[[str], str],
        *,
        api_url: str | None = None,
    ) -> None:
        self.public = public
        try:
            from vonage_http_client import Auth, HttpClient, HttpClientOptions
            from vonage_voice import Voice
        except ImportError:
            raise MissingExtraError("vonage", "vonage") from None
        options = HttpClientOptions(api_host=urlsplit(api_url).netloc) if api_url else None
        auth = Auth(application_id=application_id, private_key=private_key_text(private_key))
        self._voice = Voice(HttpClient(auth, options))

    async def _run(self, request: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.to_thread(request, *args)
        except Exception as exc:  # the SDK's HttpRequestError and friends, OSError
            raise CarrierCallError(self.carrier, 0, f"{type(exc).__name__}: {exc}") from None

    async def hang_up(self, call_id: str) -> None:
        await self._run(self._voice.hangup, call_id)

    async def transfer(self, call_id: str, target: str, *, desk: str) -> None:
        from vonage_voice.models import Connect, PhoneEndpoint, SipEndpoint

        endpoint: Any = (
            SipEndpoint(uri=target)
            if target.startswith("sip")
            else PhoneEndpoint(number=target.lstrip("+"))
        )
        # from one of the application's numbers (the caller's line is not kept here)
        connect = Connect(endpoint=[endpoint], randomFromNumber=True)
        await self._run(self._voice.transfer_call_ncco, call_id, [connect])

    async def send_digits(self, call_id: str, digits: str) -> None:
        await self._run(self._voice.play_dtmf_into_call, call_id, digits.replace("w", "p"))

    async def dial_back(self, call: DialBack) -> str:
        from vonage_voice.models import CreateCallRequest, Phone, ToPhone

        path = f"/vonage/{call.desk}/callback/{call.attempt_id}"
        request = CreateCallRequest(
            to=[ToPhone(number=call.to.lstrip("+"))],
            from_=Phone(number=call.from_.lstrip("+")),
            answer_url=[self.public(path)],
            answer_method="GET",
            event_url=[self.public(path + "/event")],
            event_method="POST",
            machine_detection="hangup",
        )
        response = await self._run(self._voice.create_call, request)
        return str(response.uuid)

    async def aclose(self) -> None:
        return None  # a requests session per call of the SDK: nothing held open
