"""Twilio's REST API as the server uses it: place a call, redirect or end a live one (new
TwiML for a transfer, keypad tones, a voicemail; its voice webhook for a call nobody
carries), send an SMS and look for one already sent.

The `twilio` package's client is synchronous (requests): each call runs in a thread so the
event loop stays free. Its errors come back as `TwilioApiError` (status, Twilio's code,
message), so callers need not import the package; `permanent` tells a refusal that will not
change on retry (a 4xx: a bad number, an ended call) from an outage.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from voicehub.errors import MissingExtraError, VoicehubError

__all__ = ["TwilioApiError", "TwilioRest"]

_RING_SECONDS = 30  # how long Twilio lets a phone ring, unless told otherwise
# The client logs each request's query at INFO (a message search names the number): its
# own logger, kept to warnings, so no caller number reaches the server's log.
_REQUESTS = logging.getLogger("voicehub.twilio.requests")
_REQUESTS.setLevel(logging.WARNING)


class TwilioApiError(VoicehubError):
    """Twilio's REST API refused a request, or could not be reached (status 0)."""

    def __init__(self, status: int, code: int | None, message: str) -> None:
        super().__init__(f"Twilio API error {status} (code {code}): {message}")
        self.status, self.code, self.message = status, code, message

    @property
    def permanent(self) -> bool:
        """A refusal (4xx) rather than an outage: retrying the same request will not help."""
        return 400 <= self.status < 500 and self.status != 429


class TwilioRest:
    """The account's REST API; `api_url` replaces Twilio's own address (a proxy, a fake)."""

    def __init__(self, account_sid: str, auth_token: str, *, api_url: str | None = None) -> None:
        try:
            from twilio.http.http_client import TwilioHttpClient
            from twilio.rest import Client
        except ImportError:
            raise MissingExtraError("twilio", "twilio") from None
        self._client = Client(
            account_sid, auth_token, http_client=TwilioHttpClient(logger=_REQUESTS)
        )
        if api_url is not None:
            self._client.api.base_url = api_url.rstrip("/")

    async def _run(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        from twilio.base.exceptions import TwilioException, TwilioRestException

        try:
            return await asyncio.to_thread(request, *args, **kwargs)
        except TwilioRestException as exc:
            raise TwilioApiError(exc.status, exc.code, str(exc.msg)) from None
        except (TwilioException, OSError) as exc:  # no answer at all
            raise TwilioApiError(0, None, f"{type(exc).__name__}: {exc}") from None

    async def dial(
        self,
        *,
        to: str,
        from_: str,
        url: str,
        status_callback: str,
        machine_detection: str = "Enable",
        async_amd_callback: str | None = None,
        timeout: float = _RING_SECONDS,
    ) -> str:
        """Place a call whose TwiML Twilio fetches from `url` once answered; the new call's
        sid. With `async_amd_callback`, detection runs while the TwiML does and its verdict
        is posted there."""
        options: dict[str, Any] = {}
        if async_amd_callback is not None:
            options = {"async_amd": "true", "async_amd_status_callback": async_amd_callback}
        call = await self._run(
            self._client.calls.create,
            to=to,
            from_=from_,
            url=url,
            method="POST",
            status_callback=status_callback,
            status_callback_method="POST",
            machine_detection=machine_detection,
            timeout=round(timeout),
            **options,
        )
        return str(call.sid)

    async def called_number(self, call_sid: str) -> str:
        """The number a call was made to: for an incoming call, our line."""
        call = await self._run(self._client.calls(call_sid).fetch)
        return str(call.to or "")

    async def redirect(self, call_sid: str, twiml: str) -> None:
        """Make a live call run `twiml` now (what it ran, a media stream too, stops)."""
        await self._run(self._client.calls(call_sid).update, twiml=twiml)

    async def redirect_to(self, call_sid: str, url: str) -> None:
        """Make a live call fetch its TwiML from `url` (POST) and run it now."""
        await self._run(self._client.calls(call_sid).update, url=url, method="POST")

    async def hang_up(self, call_sid: str) -> None:
        """End a call (a ringing one is cancelled)."""
        await self._run(self._client.calls(call_sid).update, status="completed")

    async def send_sms(self, *, to: str, from_: str, body: str) -> str:
        """Send a text message; its sid."""
        message = await self._run(self._client.messages.create, to=to, from_=from_, body=body)
        return str(message.sid)

    async def sms_sent(self, *, to: str, since: float, containing: str) -> str | None:
        """The sid of a message sent to `to` since `since` (epoch seconds) whose body holds
        `containing`, if there is one (an earlier attempt may have sent it)."""
        after = dt.datetime.fromtimestamp(since, dt.UTC)
        found = await self._run(self._client.messages.list, to=to, date_sent_after=after, limit=200)
        return next((str(m.sid) for m in found if containing in (m.body or "")), None)
