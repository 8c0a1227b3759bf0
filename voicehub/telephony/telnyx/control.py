"""Telnyx call control on the official SDK (`telnyx.AsyncTelnyx`): hang-up, cold transfer
and keypad tones on a call's `call_control_id` (a TeXML call's `CallSid` is one), and
call-backs: an outbound TeXML call (`TELNYX_ACCOUNT_SID`, `TELNYX_APPLICATION_ID`) with
synchronous answering-machine detection (`DetectMessageEnd`: its TeXML is fetched once the
verdict is in, with `AnsweredBy`); a live call's redirect to our webhook (fail-over: the
TeXML call update's `Url`).

`TELNYX_API_KEY` authenticates (Bearer); `TELNYX_API_URL` replaces the API's address (a
proxy, a fake). A 422 with error code 90018 means the call has ended already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from voicehub.errors import MissingExtraError
from voicehub.telephony.callback import DialBack
from voicehub.telephony.control import CarrierCallError

__all__ = ["TelnyxCalls"]


class TelnyxCalls:
    """`CarrierCalls` for Telnyx."""

    carrier = "telnyx"

    def __init__(
        self,
        api_key: str,
        public: Callable[[str], str],
        *,
        api_url: str | None = None,
        account_sid: str | None = None,
        application_id: str | None = None,
    ) -> None:
        self.public, self.account_sid, self.application_id = public, account_sid, application_id
        try:
            import telnyx
        except ImportError:
            raise MissingExtraError("telnyx", "telnyx") from None
        self._client = telnyx.AsyncTelnyx(api_key=api_key, base_url=api_url, max_retries=1)
        self._errors: tuple[type[Exception], ...] = (telnyx.APIError,)

    async def _run(self, request: Any) -> None:
        try:
            await request
        except self._errors as exc:
            status = int(getattr(exc, "status_code", 0) or 0)  # connection errors have none
            raise CarrierCallError(self.carrier, status, str(exc)) from None

    async def hang_up(self, call_id: str) -> None:
        await self._run(self._client.calls.actions.hangup(call_id))

    async def transfer(self, call_id: str, target: str, *, desk: str) -> None:
        await self._run(self._client.calls.actions.transfer(call_id, to=target))

    async def send_digits(self, call_id: str, digits: str) -> None:
        await self._run(self._client.calls.actions.send_dtmf(call_id, digits=digits))

    async def dial_back(self, call: DialBack) -> str:
        if not self.account_sid or not self.application_id:
            raise CarrierCallError(
                self.carrier, 0, "call-backs need TELNYX_ACCOUNT_SID and TELNYX_APPLICATION_ID"
            )
        path = f"/telnyx/{call.desk}/callback/{call.attempt_id}"
        # The API's own field names: the SDK sends this body as it is given.
        body: Any = {
            "ApplicationSid": self.application_id,
            "From": call.from_,
            "To": call.to,
            "Url": self.public(path),
            "UrlMethod": "POST",
            "StatusCallback": self.public(path + "/status"),
            "StatusCallbackMethod": "POST",
            "MachineDetection": "DetectMessageEnd",  # the verdict at a machine's beep
        }
        try:
            response = await self._client.texml.accounts.calls.calls(self.account_sid, body=body)
        except self._errors as exc:
            status = int(getattr(exc, "status_code", 0) or 0)
            raise CarrierCallError(self.carrier, status, str(exc)) from None
        return str(response.to_dict().get("call_sid") or response.status or "queued")

    async def redirect_to(self, call_sid: str, url: str) -> None:
        """Make the live TeXML call fetch its TeXML from `url` now (fail-over)."""
        if not self.account_sid:
            raise CarrierCallError(self.carrier, 0, "redirecting a call needs TELNYX_ACCOUNT_SID")
        update = self._client.texml.accounts.calls.update
        await self._run(update(call_sid, account_sid=self.account_sid, url=url, method="POST"))

    async def aclose(self) -> None:
        await self._client.close()
