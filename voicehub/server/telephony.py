"""The server's telephony beyond answering calls, composed once per app: call-backs
(`voicehub.server.callback`), follow-ups of results nobody collects
(`voicehub.server.followups`), transfers and keypad tones on Twilio calls
(`voicehub.server.transfer`), desk handoffs for browser callers
(`voicehub.server.desk_transfer`), and each live call's `CallControl` in the hub's
live-call registry, where the telephony tools find it (`voicehub.tools.call_control`).

It watches calls as a switchboard `CallObserver`: a call whose session started gets the
control its transport allows (a Twilio call: the REST API on its sid; any other: desk handoffs), and
loses it when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

from voicehub.server.callback import CallBacks, callback_routes
from voicehub.server.desk_transfer import DeskTransferControl
from voicehub.server.followups import ServerFollowUps
from voicehub.server.transfer import TwilioTransfers
from voicehub.server.transfer_routes import transfer_routes
from voicehub.tools.call_control import CallControl, live_calls

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.server.calls import LiveCall
    from voicehub.server.settings import ServerSettings
    from voicehub.server.twilio import PhoneLine
    from voicehub.server.twilio_rest import TwilioRest
    from voicehub.voice.transport import CallTransport

__all__ = ["Telephony", "telephony_routes"]


class Telephony:
    """Call-backs, transfers and the live calls' controls of one server."""

    def __init__(
        self,
        line: PhoneLine,
        settings: ServerSettings,
        clock: Clock,
        rest: TwilioRest | None,
        *,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.line, self.clock = line, clock
        self.rest = rest  # None: no REST API set up (`dialer_from`)
        board = line.board
        self.callbacks = CallBacks(line, rest, clock, draining=draining)
        self.followups = ServerFollowUps(
            board.hub, board.desks, number_key=line.number_key, rest=rest
        )
        line.remember = self.remember
        self.transfers = TwilioTransfers(line, rest, clock)
        self._forget: dict[int, Callable[[], None]] = {}

    def start(self) -> None:
        """Start sweeping for results to follow up."""
        self.followups.start()

    def remember(self, room_id: str, caller: str, line: str) -> None:
        """An incoming call's numbers, for a call-back and a follow-up SMS."""
        self.callbacks.remember(room_id, caller, line)
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
        """A Twilio call acts through the REST API on its sid; others hand over to desks."""
        call_sid = getattr(call.transport, "call_sid", "")
        if call_sid:
            return self.transfers.control(call, call_sid)
        return DeskTransferControl(self.line.board, call, self.clock)

    async def aclose(self) -> None:
        await self.callbacks.aclose()
        await self.transfers.aclose()
        await self.followups.aclose()


def telephony_routes() -> list[BaseRoute]:
    """Twilio's webhooks for call-backs and transfers."""
    return [*callback_routes(), *transfer_routes()]
