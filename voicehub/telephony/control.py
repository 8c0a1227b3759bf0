"""The one call-control shape every carrier implements, and the tools' control over it.

A carrier's REST API does three things to a live call that the desk's tools need
(`voicehub.tools.call_control.CallControl`): hang it up, transfer it (cold: the carrier
connects the caller to the target and our stream ends) and play keypad tones into it; and
it places call-backs (`voicehub.telephony.callback`).
`CarrierCalls` is that shape; `telnyx/control.py`, `plivo/control.py` and
`vonage/control.py` implement it on each carrier's official SDK. `CarrierCallControl` is
the tools' control of one live call on such a carrier: each step waits until the agent has
said what happens (its reply played), and a refusal by the carrier is told to the caller.

Twilio has a richer control of its own (warm transfers through conferences, call-backs):
`voicehub.telephony.twilio.transfer`. On the other carriers a warm transfer is put through
cold (logged): a briefed hand-over needs the carrier's conference verbs, not built yet.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from voicehub.core.jobs import BackgroundJobs
from voicehub.delivery.policy import Immediate
from voicehub.desks.agent_quiet import until_agent_quiet
from voicehub.desks.held_results import NOTICE_KIND
from voicehub.desks.room_notes import record_transfer
from voicehub.errors import VoicehubError
from voicehub.tools.call_control import CallControlError, TransferRequest

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.desks.call_lifecycle import LiveCall
    from voicehub.hub import Hub
    from voicehub.telephony.callback import DialBack

__all__ = ["NOT_SET_UP", "CarrierCallControl", "CarrierCallError", "CarrierCalls", "keypad_digits"]

NOT_SET_UP = {
    "telnyx": "TELNYX_API_KEY",
    "plivo": "PLIVO_AUTH_ID and PLIVO_AUTH_TOKEN",
    "vonage": "VONAGE_APPLICATION_ID and VONAGE_PRIVATE_KEY",
}

log = logging.getLogger("voicehub.telephony")


class CarrierCallError(VoicehubError):
    """A carrier's REST API refused a request, or could not be reached (status 0)."""

    def __init__(self, carrier: str, status: int, message: str) -> None:
        super().__init__(f"{carrier} API error {status}: {message}")
        self.carrier, self.status, self.message = carrier, status, message


class CarrierCalls(Protocol):
    """A carrier's REST call control on live calls (raises `CarrierCallError`)."""

    @property
    def carrier(self) -> str: ...

    async def hang_up(self, call_id: str) -> None:
        """End the call."""
        ...

    async def transfer(self, call_id: str, target: str, *, desk: str) -> None:
        """Connect the caller to `target` (E.164 or a SIP URI); our stream ends."""
        ...

    async def send_digits(self, call_id: str, digits: str) -> None:
        """Play keypad tones into the call (`w`: a half-second pause)."""
        ...

    async def dial_back(self, call: DialBack) -> str:
        """Place a call-back with answering-machine detection, its webhooks under
        `/{carrier}/{desk}/callback/{attempt}` (`voicehub.telephony.callback`)."""
        ...

    async def aclose(self) -> None:
        """Release the client (its connection pool)."""
        ...


def keypad_digits(digits: str) -> str:
    """The digits a carrier takes: 0-9, * and #, with `w` for a pause; A-D refused."""
    if any(d in "ABCD" for d in digits):
        raise CallControlError("this phone line cannot send the keys A to D.")
    return digits


class CarrierCallControl:
    """`CallControl` for one live call on a carrier with `CarrierCalls`."""

    def __init__(
        self,
        calls: CarrierCalls | None,
        kind: str,
        hub: Hub,
        call: LiveCall,
        call_id: str,
        clock: Clock,
        jobs: BackgroundJobs,
    ) -> None:
        self.calls, self.kind, self.hub, self.call, self.call_id = calls, kind, hub, call, call_id
        self.clock, self.jobs = clock, jobs

    def _api(self) -> CarrierCalls:
        if self.calls is None:
            variables = NOT_SET_UP.get(self.kind, "its API credentials")
            raise CallControlError(
                f"transfers and keypad tones on {self.kind} lines need {variables} on the server."
            )
        return self.calls

    async def transfer(self, request: TransferRequest) -> str:
        self._api()
        target = request.target
        if target.phone is None:
            raise CallControlError(
                f"{target.name} takes only browser callers (it is the {target.desk} desk)."
            )
        if request.mode == "warm":
            log.info("room %s: warm transfer put through cold on %s", self.call.room_id, self.kind)
        self.jobs.start(self._transfer(request), room_id=self.call.room_id)
        return f"I'm putting you through to {target.name} now."

    async def send_digits(self, digits: str) -> str:
        self._api()
        wanted = keypad_digits(digits)
        self.jobs.start(self._digits(wanted), room_id=self.call.room_id)
        return f"Pressing {' '.join(d for d in digits if d != 'w')}."

    async def _after_reply(self) -> None:
        session = self.call.session
        if session is not None:
            await until_agent_quiet(session.activity, self.clock)

    async def _transfer(self, request: TransferRequest) -> None:
        target = request.target
        await self._after_reply()
        try:
            await self._api().transfer(self.call_id, target.phone or "", desk=self.call.desk.name)
        except CarrierCallError as exc:
            log.warning("room %s: transfer refused: %s", self.call.room_id, exc)
            await self._record(request, "api_error", str(exc))
            await self._tell(f"Sorry, I could not put you through to {target.name}.")
            return
        log.info("room %s: cold transfer to %s on %s", self.call.room_id, target.name, self.kind)
        await self._record(request, "connected")

    async def _digits(self, digits: str) -> None:
        await self._after_reply()
        try:
            await self._api().send_digits(self.call_id, digits)
            log.info("room %s: sent %d keypad tones", self.call.room_id, len(digits))
        except CarrierCallError as exc:
            log.warning("room %s: keypad tones not sent: %s", self.call.room_id, exc)

    async def _record(self, request: TransferRequest, outcome: str, detail: str = "") -> None:
        await record_transfer(
            self.hub,
            self.call.desk,
            self.call.room_id,
            request,
            outcome,
            detail=detail,
            live=lambda room_id: room_id == self.call.room_id and not self.call.finished.is_set(),
        )

    async def _tell(self, text: str) -> None:
        await self.hub.delivery.deliver(
            self.call.room_id, text, strategy=Immediate(), metadata={"kind": NOTICE_KIND}
        )
