"""Phone calls through Twilio: the signed webhooks and the media stream endpoint.

    POST /twilio/{desk}/voice    incoming call webhook -> TwiML <Connect><Stream>, <Redirect>
    POST /twilio/{desk}/status   call and stream status callbacks
    WS   /twilio/{desk}/stream   the media stream (`voicehub.transports.twilio`)

Every webhook must carry a valid `X-Twilio-Signature` for `public_url` + path (the URL
Twilio was given; behind a tunnel the request's own host is not it), checked with the
`twilio` package's `RequestValidator` against the account's auth token: a bad or missing
signature gets 403 and nothing runs. The stream WebSocket is let in by a one-use token
the voice webhook minted (`voicehub.server.stream_tokens`), carried back to us as a
`<Parameter>` in the stream's `start` message.

A call outlives the instance that answers it. The TwiML puts a `<Redirect>` to the voice
webhook (`?resume=1`) after `<Connect><Stream>`: Twilio runs it when the stream's WebSocket
closes without the caller hanging up (the instance died, or handed the call over while
draining), and the instance the redirect reaches (any, behind the public URL) opens a new
stream on itself: the conversation goes on where the call record and the room left it
(`voicehub.desks.call_book`). A call that ended on purpose gets `<Hangup/>` instead. When
the redirect does not come (the stream broke without Twilio noticing, or the instance died
without closing it), the stream's status callback or a survivor's sweep redirects the call
through the REST API (`voicehub.server.twilio_takeover`).

By default a call's conversation is keyed to the caller's number (an HMAC under the
store's secret, `voicehub.core.store.number_key`: the number is not stored and cannot be
recovered from the id), so calling back reaches the same room and hears the results held
meanwhile, across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.store.number_key import (
    caller_conversation,
    legacy_caller_conversation,
    number_conversation,
)
from voicehub.errors import MissingExtraError
from voicehub.server.app_state import parts_of
from voicehub.server.calls import LiveCall, Switchboard
from voicehub.server.keypad import Keypad
from voicehub.server.stream_tokens import StreamGrant, StreamTokens
from voicehub.transports.twilio import (
    Dtmf,
    Mark,
    Media,
    Stop,
    StreamProblem,
    StreamReader,
    TwilioMediaTransport,
    decode_payload,
    parse_stream_message,
)

if TYPE_CHECKING:
    from voicehub.server.settings import ServerSettings
    from voicehub.voice.session import VoiceSession

__all__ = [
    "HANGUP_TWIML",
    "PhoneLine",
    "caller_conversation",
    "legacy_caller_conversation",
    "public_url",
    "signed_form",
    "stream_twiml",
    "twilio_routes",
]

log = logging.getLogger("voicehub.twilio")

_SID = re.compile(r"[A-Za-z0-9]{2,64}")
_START_TIMEOUT = 10.0  # seconds Twilio gets to send `start` after connecting
# The session runs at 16 kHz, as for browsers: the transport resamples, not livekit's
# resampler in front of the recognizer (its 8 kHz path garbles phone speech for PocketSphinx).
_SESSION_RATE = 16000
_MAX_FORM_BYTES = 64_000  # Twilio's webhook forms are about 1 KB
_MAX_PROBLEMS_BEFORE_START = 20  # frames dropped before `start` before we give up
HANGUP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


@dataclass
class PhoneLine:
    """The Twilio side of the server: settings, the switchboard and the stream tokens."""

    board: Switchboard
    settings: ServerSettings
    tokens: StreamTokens
    number_key: bytes
    # Told the numbers of each incoming call (room id, caller, number called): call-backs.
    remember: Callable[[str, str, str], None] | None = None
    clock: Clock = field(default_factory=SystemClock)  # keypad timing (virtual in tests)
    # Told each stream that ended (desk, conversation, call sid, stream sid): it may leave
    # a call nobody carries (`voicehub.server.twilio_takeover`).
    stream_ended: Callable[[str, str, str, str], None] | None = None

    def public(self, path: str, scheme: str = "https") -> str:
        return public_url(self.settings, path, scheme)

    async def conversation_of(self, desk: str, number: str) -> str | None:
        """The conversation of a caller's number at `desk` (None: withheld or odd number);
        see `voicehub.core.store.number_key`."""
        return await number_conversation(self.board.hub.store, desk, number, self.number_key)

    def signature_problem(self, request: Request, params: dict[str, str]) -> str | None:
        """None if the request is signed by Twilio for our public URL, else why not."""
        token = self.settings.twilio_auth_token
        if token is None or self.settings.public_url is None:
            return "phone calls are not set up: set TWILIO_AUTH_TOKEN and VOICEHUB_PUBLIC_URL"
        signature = request.headers.get("x-twilio-signature")
        if not signature:
            return "missing X-Twilio-Signature header"
        try:
            from twilio.request_validator import RequestValidator
        except ImportError:
            raise MissingExtraError("twilio", "twilio") from None
        url = self.public(request.url.path)
        if request.url.query:
            url += "?" + request.url.query
        if not RequestValidator(token).validate(url, params, signature):
            return f"X-Twilio-Signature does not match {url} (is VOICEHUB_PUBLIC_URL right?)"
        return None


def public_url(settings: ServerSettings, path: str, scheme: str = "https") -> str:
    """`path` under the server's public URL (the one Twilio was given), or `wss`."""
    base = (settings.public_url or "").rstrip("/")
    if scheme == "wss":
        base = "wss" + base[len("https") :]
    return base + path


async def signed_form(request: Request) -> tuple[PhoneLine, dict[str, str]] | Response:
    line = parts_of(request).phone
    body = await request.body()
    if len(body) > _MAX_FORM_BYTES:
        return PlainTextResponse("webhook body too big\n", status_code=413)
    # Twilio posts application/x-www-form-urlencoded; parsing it here spares a dependency.
    params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    problem = line.signature_problem(request, params)
    if problem is not None:
        log.warning("refused %s from %s: %s", request.url.path, _peer(request), problem)
        return PlainTextResponse(f"forbidden: {problem}\n", status_code=403)
    return line, params


async def voice_webhook(request: Request) -> Response:
    """Answer an incoming call: TwiML connecting it to the desk's media stream."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    desk_name = request.path_params["desk"]
    desk = line.board.desks.get(desk_name)
    if desk is None:
        return PlainTextResponse(f"unknown desk {desk_name!r}\n", status_code=404)
    call_sid = params.get("CallSid", "")
    if not _SID.fullmatch(call_sid):
        return PlainTextResponse("bad CallSid\n", status_code=400)
    conversation = None
    if desk.config.phone.conversation == "caller":
        conversation = await line.conversation_of(desk.name, params.get("From", ""))
    if conversation is None:
        conversation = "call-" + call_sid[-24:]
    if request.query_params.get("resume") == "1":
        # Twilio ran the <Redirect> after the stream (or a survivor redirected the call):
        # the call goes on unless it ended on purpose.
        record = await line.board.hub.store.get_call(f"{desk.name}:{conversation}")
        if record is None or not record.state.open:
            log.info("call %s: ended; hanging up after its stream", call_sid)
            return Response(HANGUP_TWIML, media_type="application/xml")
        log.info("call %s: taking it up (%s on %s)", call_sid, record.state, record.owner)
    else:
        if line.remember is not None and conversation.startswith("tel-"):
            room_id = f"{desk.name}:{conversation}"
            line.remember(room_id, params.get("From", ""), params.get("To", ""))
        log.info("call %s to desk %s: conversation %s", call_sid, desk.name, conversation)
    token = line.tokens.mint(desk.name, conversation, call_sid)
    return Response(
        stream_twiml(line, desk.name, conversation, token), media_type="application/xml"
    )


def stream_twiml(line: PhoneLine, desk: str, conversation: str, token: str) -> str:
    try:
        from twilio.twiml.voice_response import Connect, VoiceResponse
    except ImportError:
        raise MissingExtraError("twilio", "twilio") from None
    response = VoiceResponse()
    connect = Connect()
    stream = connect.stream(
        url=line.public(f"/twilio/{desk}/stream", scheme="wss"),
        name=f"voicehub-{desk}",
        status_callback=line.public(f"/twilio/{desk}/status?conversation={conversation}"),
        status_callback_method="POST",
    )
    stream.parameter(name="token", value=token)
    stream.parameter(name="conversation", value=conversation)
    response.append(connect)
    # Run when the stream's socket closes without a hang-up: the call goes on elsewhere.
    response.redirect(line.public(f"/twilio/{desk}/voice?resume=1"), method="POST")
    return str(response)


async def status_callback(request: Request) -> Response:
    """Call and stream status reports. A stream that stopped or broke may leave a call no
    instance carries (when Twilio's redirect does not come): `stream_ended` follows it up."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    status = params.get("CallStatus") or params.get("StreamEvent") or "?"
    log.info("twilio status for %s: %s", params.get("CallSid", "?"), status)
    conversation = request.query_params.get("conversation", "")
    call_sid = params.get("CallSid", "")
    ended = params.get("StreamEvent") in ("stream-stopped", "stream-error")
    if ended and line.stream_ended is not None and _SID.fullmatch(call_sid) and conversation:
        if params.get("StreamError"):
            log.warning("stream of call %s: %s", call_sid, params["StreamError"])
        stream_sid = params.get("StreamSid", "")
        line.stream_ended(request.path_params["desk"], conversation, call_sid, stream_sid)
    return Response(status_code=204)


# -- the media stream ---------------------------------------------------------------------


async def media_stream(websocket: WebSocket) -> None:
    """One Twilio media stream: wait for `start`, redeem its token, run the call."""
    line = parts_of(websocket).phone
    await websocket.accept()
    reader = StreamReader()
    with contextlib.suppress(TimeoutError, _Gone):
        await asyncio.wait_for(_until_start(websocket, reader), _START_TIMEOUT)
    start = reader.start
    if start is None:
        log.warning("media stream closed: no valid 'start' (%d bad frames)", reader.problems)
        await _close(websocket, 1008, "expected a 'start' message")
        return
    grant = line.tokens.redeem(start.start.customParameters.get("token"))
    desk_name = websocket.path_params["desk"]
    if isinstance(grant, StreamGrant) and grant.desk != desk_name:
        grant = f"the stream token is for desk {grant.desk!r}, not {desk_name!r}"
    if not isinstance(grant, StreamGrant):
        log.warning("media stream %s refused: %s", start.streamSid, grant)
        await _close(websocket, 1008, grant)
        return
    transport = TwilioMediaTransport(
        start.streamSid, sample_rate=_SESSION_RATE, call_sid=grant.call_sid
    )
    ids = {"call_sid": grant.call_sid, "stream_sid": start.streamSid}
    call = LiveCall(
        line.board.desks[grant.desk], grant.conversation, transport, kind="twilio", line=ids
    )
    log.info("call %s: stream %s in room %s", grant.call_sid, start.streamSid, call.room_id)
    await line.board.run_socket_call(
        websocket, call, transport, _Feeder(reader, transport, line).run
    )


class _Gone(Exception):
    """The socket closed before `start`."""


async def _until_start(websocket: WebSocket, reader: StreamReader) -> None:
    while reader.start is None:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise _Gone
        frame = reader.accept(parse_stream_message(_frame(message)))
        if isinstance(frame, StreamProblem):
            log.warning("media stream: dropped a frame: %s", frame.message)
            if reader.problems >= _MAX_PROBLEMS_BEFORE_START:
                raise _Gone


class _Feeder:
    """Reads the rest of the stream into the call's session."""

    def __init__(
        self, reader: StreamReader, transport: TwilioMediaTransport, line: PhoneLine
    ) -> None:
        self.reader, self.transport, self.line = reader, transport, line
        self.clock = line.clock  # the phone side's clock (virtual in tests)

    async def run(self, websocket: WebSocket, call: LiveCall) -> None:
        session = call.session
        assert session is not None
        keypad = Keypad(session, call.desk.config.phone, self.line.board.hub.store, self.clock)
        try:
            await self._read(websocket, call, session, keypad)
        finally:
            await keypad.aclose()

    async def _read(
        self, websocket: WebSocket, call: LiveCall, session: VoiceSession, keypad: Keypad
    ) -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            frame = self.reader.accept(parse_stream_message(_frame(message)))
            if isinstance(frame, Media):
                if frame.media.track not in ("inbound", "inbound_track"):
                    continue
                ulaw = decode_payload(frame.media.payload)
                if not isinstance(ulaw, StreamProblem):
                    await session.push_audio(self.transport.caller_audio(ulaw))
                    continue
                frame = ulaw
                self.reader.problems += 1
            if isinstance(frame, StreamProblem):
                log.warning("room %s: dropped a frame: %s", call.room_id, frame.message)
            elif isinstance(frame, Mark):
                session.playout_confirmed(frame.mark.name)
            elif isinstance(frame, Dtmf):
                keypad.press(frame.dtmf.digit)
            elif isinstance(frame, Stop):  # the caller hung up
                call.hang_up("stream stopped")
                return


def _frame(message: Any) -> str | bytes:
    text: str | None = message.get("text")
    if text is not None:
        return text
    data: bytes | None = message.get("bytes")
    return data if data is not None else b""


def _peer(request: Request) -> str:
    return request.client.host if request.client is not None else "?"


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    try:
        await websocket.close(code, reason[:120])
    except Exception:  # the peer may be gone already
        log.debug("media stream: close failed", exc_info=True)


def twilio_routes() -> list[BaseRoute]:
    """The phone routes (they answer 403 until the Twilio settings are given)."""
    return [
        Route("/twilio/{desk}/voice", voice_webhook, methods=["POST"]),
        Route("/twilio/{desk}/status", status_callback, methods=["POST"]),
        WebSocketRoute("/twilio/{desk}/stream", media_stream),
    ]
