"""The server's telephony beyond answering calls, composed once per app: call-backs
(`voicehub.telephony.callback`, placed by the carrier the caller came through), follow-ups
of results nobody collects (`voicehub.server.followups`), transfers and keypad tones on Twilio calls
(`voicehub.telephony.twilio.transfer`), desk handoffs for browser callers
(`voicehub.server.desk_transfer`), and each live call's `CallControl` in the hub's
live-call registry, where the telephony tools find it (`voicehub.tools.call_control`).

It watches calls as a switchboard `CallObserver`: a call whose session started gets the
control its transport allows (a Twilio call: the REST API on its sid; any other: desk handoffs), and
loses it when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from voicehub.core.jobs import BackgroundJobs
from voicehub.server.desk_transfer import DeskTransferControl
from voicehub.server.followups import ServerFollowUps
from voicehub.telephony.callback import CallBackDialer, CallBacks
from voicehub.telephony.carriers import carrier_routes
from voicehub.telephony.control import NOT_SET_UP, CarrierCallControl, CarrierCalls
from voicehub.telephony.line import PhoneLine
from voicehub.telephony.twilio.callback import TwilioCallBackDialer, callback_routes
from voicehub.telephony.twilio.transfer import TwilioTransfers
from voicehub.telephony.twilio.transfer_routes import transfer_routes
from voicehub.tools.call_control import CallControl, live_calls

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.server.calls import LiveCall, Switchboard
    from voicehub.server.settings import ServerSettings
    from voicehub.telephony.stream_tokens import StreamTokens
    from voicehub.telephony.twilio.rest import TwilioRest
    from voicehub.voice.transport import CallTransport

__all__ = ["Telephony", "telephony_routes"]


class Telephony:
    """Call-backs, transfers and the live calls' controls of one server."""

    def __init__(
        self,
        board: Switchboard,
        settings: ServerSettings,
        clock: Clock,
        rest: TwilioRest | None,
        carriers: Mapping[str, CarrierCalls],
        tokens: StreamTokens,
        number_key: bytes,
        *,
        stream_ended: Callable[[str, str, str, str], None] | None = None,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        # The phone line is built here, told each incoming call's numbers by `remember`
        # (called on calls, once the call-backs and follow-ups below exist)
        self.line = line = PhoneLine(
            board,
            settings,
            tokens,
            number_key,
            remember=self.remember,
            clock=clock,
            stream_ended=stream_ended,
        )
        self.board, self.clock = board, clock
        self.rest = rest  # None: no REST API set up (`dialer_from`)
        # Telnyx, Plivo and Vonage calls: their REST APIs, where the credentials are set
        self.carrier_calls = dict(carriers)
        dialers: dict[str, CallBackDialer] = dict(self.carrier_calls)
        if rest is not None:
            dialers["twilio"] = TwilioCallBackDialer(rest, line)
        if line.settings.public_url is None:
            dialers = {}  # the carrier could not reach the call-back's webhooks
        self.callbacks = CallBacks(line, dialers, clock, draining=draining)
        self.followups = ServerFollowUps(
            board.hub, board.desks, number_key=line.number_key, rest=rest
        )
        self.transfers = TwilioTransfers(line, rest, clock)
        self._carrier_jobs = BackgroundJobs()
        self._carrier_rooms: set[str] = set()
        self._forget: dict[int, Callable[[], None]] = {}

    def start(self) -> None:
        """Start sweeping for results to follow up."""
        self.followups.start()

    def remember(self, room_id: str, caller: str, line: str, carrier: str) -> None:
        """An incoming call's numbers, for a call-back and a follow-up SMS."""
        self.callbacks.remember(room_id, caller, line, carrier)
        self.followups.remember(room_id, caller, line)

    # -- CallObserver ----------------------------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        control = self.control_for(call)
        self._forget[id(call)] = live_calls(self.line.board.hub).register(call.room_id, control)

    def call_ended(self, call: LiveCall) -> None:
        forget = self._forget.pop(id(call), None)
        if forget is not None:
            forget()

    def control_for(self, call: LiveCall) -> CallControl:
        """A phone call acts through its carrier's REST API on its call id (Twilio's own
        control, or the one every other carrier shares); others hand over to desks."""
        call_id = call.line.get("call_sid", "")
        if call.kind == "twilio" and call_id:
            return self.transfers.control(call, call_id)
        if call.kind in NOT_SET_UP and call_id:
            self._carrier_rooms.add(call.room_id)
            return CarrierCallControl(
                self.carrier_calls.get(call.kind),
                call.kind,
                self.board.hub,
                call,
                call_id,
                self.clock,
                self._carrier_jobs,
            )
        return DeskTransferControl(self.board, call, self.clock)

    async def aclose(self) -> None:
        await self.callbacks.aclose()
        await self.transfers.aclose()
        await self.followups.aclose()
        for room_id in self._carrier_rooms:
            await self._carrier_jobs.cancel_room(room_id)
        for calls in self.carrier_calls.values():
            await calls.aclose()


def telephony_routes() -> list[BaseRoute]:
    """Twilio's webhooks for call-backs and transfers; the other carriers' numbers."""
    return [*callback_routes(), *transfer_routes(), *carrier_routes()]
