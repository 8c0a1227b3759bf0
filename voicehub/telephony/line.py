"""What every carrier's webhooks and media streams share: the server's phone line.

`PhoneLine` is the telephony side of one server: the switchboard its calls run on (as
`Board`: what telephony needs of `voicehub.server.calls.Switchboard`), the settings
(`PhoneSettings`), the stream tokens, the number key and the clock. Webhook handlers find it
on `app.state.phone`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.store.number_key import number_conversation
from voicehub.telephony.settings import CarrierSettings
from voicehub.telephony.stream_tokens import StreamTokens

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

    from voicehub.desks.call_lifecycle import CallObserver, LiveCall
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.transports.pump import OutboundSocket

__all__ = ["Board", "PhoneLine", "PhoneSettings", "ReadLoop", "SocketLine", "public_url"]


class SocketLine(Protocol):
    """A call's transport that sends what it queues itself (the socket's one writer)."""

    async def pump(self, socket: OutboundSocket) -> None: ...


ReadLoop = Callable[["WebSocket", "LiveCall"], Coroutine[Any, Any, None]]


class Board(Protocol):
    """What telephony needs of the server's switchboard."""

    @property
    def hub(self) -> Hub: ...

    @property
    def desks(self) -> dict[str, Desk]: ...

    @property
    def calls(self) -> dict[str, LiveCall]: ...

    @property
    def observers(self) -> list[CallObserver]: ...

    async def run_socket_call(
        self, websocket: WebSocket, call: LiveCall, line: Any, read: ReadLoop
    ) -> None:
        """Run an accepted socket call until `read` returns or the socket ends."""
        ...


class PhoneSettings(Protocol):
    """The server settings telephony reads (`voicehub.server.settings.ServerSettings`)."""

    @property
    def public_url(self) -> str | None: ...

    @property
    def twilio_auth_token(self) -> str | None: ...

    @property
    def twilio_account_sid(self) -> str | None: ...

    @property
    def twilio_api_url(self) -> str | None: ...

    @property
    def carriers(self) -> CarrierSettings: ...


@dataclass
class PhoneLine:
    """The phone side of the server: the switchboard, settings, tokens and number key."""

    board: Board
    settings: PhoneSettings
    tokens: StreamTokens
    number_key: bytes
    # Told the numbers of each incoming call (room id, caller, number called, the carrier it
    # came through): call-backs.
    remember: Callable[[str, str, str, str], None] | None = None
    clock: Clock = field(default_factory=SystemClock)  # keypad timing (virtual in tests)
    # Told each stream that ended (desk, conversation, call sid, stream sid): it may leave
    # a call nobody carries (`voicehub.telephony.twilio.takeover`).
    stream_ended: Callable[[str, str, str, str], None] | None = None

    def public(self, path: str, scheme: str = "https") -> str:
        """`path` on the server's public URL (`scheme="wss"` for a media stream)."""
        return public_url(self.settings, path, scheme)

    async def conversation_of(self, desk: str, number: str) -> str | None:
        """The conversation of a caller's number at `desk` (None: withheld or odd number);
        see `voicehub.core.store.number_key`."""
        return await number_conversation(self.board.hub.store, desk, number, self.number_key)

    def desk(self, name: str) -> Desk | None:
        return self.board.desks.get(name)


def public_url(settings: PhoneSettings, path: str, scheme: str = "https") -> str:
    """`path` on the server's public URL, the one the carrier was given (`scheme="wss"`
    for a media stream)."""
    base = (settings.public_url or "").rstrip("/")
    if scheme == "wss":
        base = "wss" + base[len("https") :]
    return base + path
