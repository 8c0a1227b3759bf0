"""Telnyx call control on the official SDK (`telnyx.AsyncTelnyx`): hang-up, cold transfer
and keypad tones on a call's `call_control_id` (a TeXML call's `CallSid` is one).

`TELNYX_API_KEY` authenticates (Bearer); `TELNYX_API_URL` replaces the API's address (a
proxy, a fake). A 422 with error code 90018 means the call has ended already.
"""

from __future__ import annotations

from typing import Any

from voicehub.errors import MissingExtraError
from voicehub.telephony.control import CarrierCallError

__all__ = ["TelnyxCalls"]


class TelnyxCalls:
    """`CarrierCalls` for Telnyx."""

    carrier = "telnyx"

    def __init__(self, api_key: str, *, api_url: str | None = None) -> None:
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

    async def aclose(self) -> None:
        await self._client.close()
