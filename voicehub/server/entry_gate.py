"""The door of new calls: refused while the server drains (`voicehub.server.drain`) or is
too loaded to answer one more (`voicehub.desks.call_admission`), each in its transport's words.

| entry | draining | busy |
|---|---|---|
| WebSocket call | error `draining`, close 1013 | error `busy`, close 1013 |
| WebRTC offer | 503, Retry-After: 5 | 503, Retry-After: 2 |
| Twilio voice webhook | TwiML: a spoken "call again", hang up | TwiML `<Reject reason="busy"/>` |

Beyond the call-start rate of a token or an address (`CallStartLimits`; WebSocket and
WebRTC calls only), a call is refused as busy too: error `rate_limited` and close 1013, or
429 with Retry-After.

1013 means "try again later": the `voicehub call` client and the console page come back
after a backoff, through the balancer, to another instance. A request that brings back a
call in progress (`?resume=1`: Twilio's redirect after a stream closed, a client's
reconnect) is not a new call: it always goes through, so an admitted call is always
answered to its end.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.responses import PlainTextResponse, Response
from starlette.websockets import WebSocket

from voicehub.server.auth import scope_token
from voicehub.server.drain import REFUSAL
from voicehub.transports.websocket import CloseCode, ProtocolViolation, error_event

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from voicehub.desks.call_admission import CallAdmission
    from voicehub.server.call_starts import CallStartLimits
    from voicehub.server.drain import Drain

__all__ = ["BUSY", "Door", "EntryGate"]

BUSY = "this server is busy; call again in a moment"
_TWIML_DRAINING = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Sorry, this line is being '
    "restarted. Please call again in a moment.</Say><Hangup/></Response>"
)
_TWIML_BUSY = '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/></Response>'

# The entry points of new calls: (entry, path, HTTP method or "websocket"). A Twilio media
# stream is not one (its call was answered by the webhook), nor a call-back this server
# placed itself.
_ENTRIES = (
    ("websocket", re.compile(r"/desks/[^/]+/call"), "websocket"),
    ("webrtc", re.compile(r"/desks/[^/]+/webrtc"), "POST"),
    ("twilio", re.compile(r"/twilio/[^/]+/voice"), "POST"),
    ("telnyx", re.compile(r"/telnyx/[^/]+/voice"), "POST"),
    ("plivo", re.compile(r"/plivo/[^/]+/answer"), "POST"),
    ("vonage", re.compile(r"/vonage/[^/]+/answer"), "GET"),
)
# Each carrier's refusal in its own answer language (TeXML is TwiML's dialect; an NCCO ends
# the call after its last action): (draining, busy, media type).
_PLIVO_DRAINING = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Speak>Sorry, this line is being '
    "restarted. Please call again in a moment.</Speak><Hangup/></Response>"
)
_PLIVO_BUSY = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup reason="busy"/></Response>'
_VONAGE_DRAINING = (
    '[{"action":"talk","text":"Sorry, this line is being restarted. Please call again in a '
    'moment."}]'
)
_VONAGE_BUSY = '[{"action":"talk","text":"Sorry, this line is busy. Please call again."}]'
_PHONE_REFUSALS = {
    "twilio": (_TWIML_DRAINING, _TWIML_BUSY, "application/xml"),
    "telnyx": (_TWIML_DRAINING, _TWIML_BUSY, "application/xml"),
    "plivo": (_PLIVO_DRAINING, _PLIVO_BUSY, "application/xml"),
    "vonage": (_VONAGE_DRAINING, _VONAGE_BUSY, "application/json"),
}


@dataclass
class Door:
    """What the gate asks: the drain, the admission (None: no limit), where refusals
    are counted (`refused(entry, reason)`) and the call-start rate limits (None: none)."""

    drain: Drain
    admission: CallAdmission | None = None
    refused: Callable[[str, str], None] = field(default=lambda entry, reason: None)
    starts: CallStartLimits | None = None


class EntryGate:
    """ASGI middleware: refuse requests that would start a call while draining or busy.
    `door()` is the server's door (None until the server's parts are built: nothing is
    refused then, as no call can start either)."""

    def __init__(self, app: ASGIApp, door: Callable[[], Door | None]) -> None:
        self.app = app
        self.door = door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = _entry(scope)
        door = self.door() if entry is not None else None
        if entry is None or door is None:
            await self.app(scope, receive, send)
            return
        if door.drain.draining:
            await self._refuse(door, entry, "draining", REFUSAL, scope, receive, send)
            return
        busy = door.admission.admit() if door.admission is not None else None
        if busy is not None:
            await self._refuse(door, entry, "busy", f"{BUSY} ({busy})", scope, receive, send)
            return
        wait = _rate_wait(door, entry, scope)
        if wait is not None:
            message = f"too many calls started; call again in {wait:.0f} s"
            await self._refuse(door, entry, "rate_limited", message, scope, receive, send, wait)
            return
        await self.app(scope, receive, send)

    async def _refuse(
        self,
        door: Door,
        entry: str,
        reason: str,
        message: str,
        scope: Scope,
        receive: Receive,
        send: Send,
        retry_after: float | None = None,
    ) -> None:
        door.refused(entry, reason)
        if scope["type"] == "websocket":
            socket = WebSocket(scope, receive, send)
            await socket.accept()
            await socket.send_text(error_event(ProtocolViolation(reason, message)).to_wire())
            await socket.close(CloseCode.TRY_AGAIN_LATER, message[:120])
            return
        response: Response
        if entry in _PHONE_REFUSALS:
            draining, busy, media_type = _PHONE_REFUSALS[entry]
            body = draining if reason == "draining" else busy
            response = Response(body, media_type=media_type)
        elif retry_after is not None:
            after = str(max(1, round(retry_after)))
            response = PlainTextResponse(message, status_code=429, headers={"Retry-After": after})
        else:
            after = "5" if reason == "draining" else "2"
            response = PlainTextResponse(message, status_code=503, headers={"Retry-After": after})
        await response(scope, receive, send)


def _rate_wait(door: Door, entry: str, scope: Scope) -> float | None:
    """Seconds until a WebSocket or WebRTC call may start under the rate limits, or None."""
    if door.starts is None or entry not in ("websocket", "webrtc"):
        return None
    client = scope.get("client")
    address = str(client[0]) if client else None
    return door.starts.take(token=scope_token(scope), address=address)


def _entry(scope: Scope) -> str | None:
    """Which entry of a new call `scope` is (None: not one, or a call coming back)."""
    kind, path = scope["type"], scope.get("path", "")
    method = scope.get("method") if kind == "http" else "websocket"
    for entry, pattern, wanted in _ENTRIES:
        if method == wanted and pattern.fullmatch(path):
            return None if _resumes(scope) else entry
    return None


def _resumes(scope: Scope) -> bool:
    """Whether the request brings back a call in progress (`?resume=1`)."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return query.get("resume") == ["1"]
