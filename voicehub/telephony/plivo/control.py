"""Plivo call control on the official SDK (`plivo.RestClient`): hang-up, cold transfer and
keypad tones on a call's `CallUUID`, and call-backs (`calls.create` with
`machine_detection="hangup"`: Plivo ends a call a machine answered; no voicemail is left),
and a live call's redirect to our webhook (fail-over: the same transfer of the caller's leg).

`PLIVO_AUTH_ID` and `PLIVO_AUTH_TOKEN` authenticate (HTTP Basic). A transfer makes Plivo
fetch new XML for the caller's leg: `/plivo/{desk}/dial?to=...` answers `<Dial>` to the
target (Plivo signs that request too). The SDK is synchronous (requests): each call runs in
a thread. `PLIVO_API_URL` replaces the API's address (a proxy, a fake) through a requests
transport adapter, the SDK's own address being fixed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from voicehub.errors import ConfigError, MissingExtraError
from voicehub.telephony.callback import DialBack
from voicehub.telephony.control import CarrierCallError

__all__ = ["PlivoCalls"]

_PLIVO_API = "https://api.plivo.com"


class PlivoCalls:
    """`CarrierCalls` for Plivo; `public(path)` is the server's public URL of `path`."""

    carrier = "plivo"

    def __init__(
        self,
        auth_id: str,
        auth_token: str,
        public: Callable[[str], str],
        *,
        api_url: str | None = None,
    ) -> None:
        try:
            import plivo
            import requests.adapters
        except ImportError:
            raise MissingExtraError("plivo", "plivo") from None
        try:
            self._client = plivo.RestClient(auth_id, auth_token)
        except plivo.exceptions.AuthenticationError as exc:
            raise ConfigError(f"PLIVO_AUTH_ID: {exc} (an MA... or SA... id)") from None
        self._errors: tuple[type[Exception], ...] = (plivo.exceptions.PlivoRestError, OSError)
        self.public = public
        if api_url is not None:
            self._client.session.mount(_PLIVO_API, _Forward(requests.adapters, api_url))

    async def _run(self, request: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            await asyncio.to_thread(request, *args, **kwargs)
        except self._errors as exc:
            raise CarrierCallError(self.carrier, 0, f"{type(exc).__name__}: {exc}") from None

    async def hang_up(self, call_id: str) -> None:
        await self._run(self._client.calls.hangup, call_id)

    async def transfer(self, call_id: str, target: str, *, desk: str) -> None:
        url = self.public(f"/plivo/{desk}/dial?{urlencode({'to': target})}")
        await self._run(
            self._client.calls.transfer, call_id, legs="aleg", aleg_url=url, aleg_method="POST"
        )

    async def redirect_to(self, call_sid: str, url: str) -> None:
        """Make the live call fetch its XML from `url` now (fail-over: a transfer of the
        caller's leg)."""
        await self._run(
            self._client.calls.transfer, call_sid, legs="aleg", aleg_url=url, aleg_method="POST"
        )

    async def send_digits(self, call_id: str, digits: str) -> None:
        await self._run(self._client.calls.send_digits, call_id, digits)

    async def dial_back(self, call: DialBack) -> str:
        path = f"/plivo/{call.desk}/callback/{call.attempt_id}"
        try:
            response = await asyncio.to_thread(
                self._client.calls.create,
                from_=call.from_.lstrip("+"),
                to_=call.to.lstrip("+"),
                answer_url=self.public(path),
                answer_method="POST",
                hangup_url=self.public(path + "/hangup"),
                hangup_method="POST",
                machine_detection="hangup",
            )
        except self._errors as exc:
            raise CarrierCallError(self.carrier, 0, f"{type(exc).__name__}: {exc}") from None
        return str(response.request_uuid)

    async def aclose(self) -> None:
        self._client.session.close()


def _Forward(adapters: Any, api_url: str) -> Any:
    """A requests adapter sending what the SDK addresses to Plivo to `api_url` instead."""

    class Forward(adapters.HTTPAdapter):  # type: ignore[misc]
        def send(self, request: Any, **kwargs: Any) -> Any:
            request.url = api_url.rstrip("/") + request.url[len(_PLIVO_API) :]
            if kwargs.get("verify", True) is True:  # the SDK sends past requests' env lookup
                kwargs["verify"] = os.environ.get("REQUESTS_CA_BUNDLE") or True
            return super().send(request, **kwargs)

    return Forward()
