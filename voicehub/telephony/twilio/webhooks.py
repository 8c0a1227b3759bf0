"""Phone calls through Twilio: the signed webhooks and the media stream endpoint.

    POST /twilio/{desk}/voice    incoming call webhook -> TwiML <Connect><Stream>, <Redirect>
    POST /twilio/{desk}/status   call and stream status callbacks
    WS   /twilio/{desk}/stream   the media stream (`voicehub.transports.twilio`)

Every webhook must carry a valid `X-Twilio-Signature` for `public_url` + path (the URL
Twilio was given; behind a tunnel the request's own host is not it), checked with the
`twilio` package's `RequestValidator` against the account's auth token: a bad or missing
signature gets 403 and nothing runs. The stream WebSocket is let in by a one-use token
the voice webhook minted (`voicehub.telephony.stream_tokens`), carried back to us as a
`<Parameter>` in the stream's `start` message.

A call outlives the instance that answers it. The TwiML puts a `<Redirect>` to the voice
webhook (`?resume=1`) after `<Connect><Stream>`: Twilio runs it when the stream's WebSocket
closes without the caller hanging up (the instance died, or handed the call over while
draining), and the instance the redirect reaches (any, behind the public URL) opens a new
stream on itself: the conversation goes on where the call record and the room left it
(`voicehub.desks.call_book`). A call that ended on purpose gets `<Hangup/>` instead. When
the redirect does not come (the stream broke without Twilio noticing, or the instance died
without closing it), the stream's status callback or a survivor's sweep redirects the call
through the REST API (`voicehub.telephony.twilio.takeover`).

By default a call's conversation is keyed to the caller's number (an HMAC under the
store's secret, `voicehub.core.store.number_key`: the number is not stored and cannot be
recovered from the id), so calling back reaches the same room and hears the results held
meanwhile, across restarts.
"""

from __future__ import annotations

import logging
import re

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicehub.core.store.number_key import caller_conversation, legacy_caller_conversation
from voicehub.errors import MissingExtraError
from voicehub.telephony.answer import answer_call
from voicehub.telephony.line import PhoneLine
from voicehub.telephony.media_stream import from_parameter, run_media_stream
from voicehub.telephony.webhook_body import form_of, read_body
from voicehub.transports.twilio import TwilioCodec

__all__ = [
    "HANGUP_TWIML",
    "PhoneLine",
    "caller_conversation",
    "legacy_caller_conversation",
    "signature_problem",
    "signed_form",
    "stream_twiml",
    "twilio_routes",
]

log = logging.getLogger("voicehub.twilio")

_SID = re.compile(r"[A-Za-z0-9]{2,64}")
HANGUP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


def signature_problem(line: PhoneLine, request: Request, params: dict[str, str]) -> str | None:
    """None if the request is signed by Twilio for our public URL, else why not."""
    token = line.settings.twilio_auth_token
    if token is None or line.settings.public_url is None:
        return "phone calls are not set up: set TWILIO_AUTH_TOKEN and VOICEHUB_PUBLIC_URL"
    signature = request.headers.get("x-twilio-signature")
    if not signature:
        return "missing X-Twilio-Signature header"
    try:
        from twilio.request_validator import RequestValidator
    except ImportError:
        raise MissingExtraError("twilio", "twilio") from None
    url = line.public(request.url.path)
    if request.url.query:
        url += "?" + request.url.query
    if not RequestValidator(token).validate(url, params, signature):
        return f"X-Twilio-Signature does not match {url} (is VOICEHUB_PUBLIC_URL right?)"
    return None


async def signed_form(request: Request) -> tuple[PhoneLine, dict[str, str]] | Response:
    line: PhoneLine = request.app.state.phone
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    params = form_of(body)  # Twilio posts application/x-www-form-urlencoded
    problem = signature_problem(line, request, params)
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
    answered = await answer_call(
        line,
        desk.name,
        call_sid,
        caller=params.get("From", ""),
        called=params.get("To", ""),
        resume=request.query_params.get("resume") == "1",
        carrier="twilio",
    )
    if answered is None:  # it ended on purpose: hang up after its stream
        return Response(HANGUP_TWIML, media_type="application/xml")
    twiml = stream_twiml(line, desk.name, answered.conversation, answered.token)
    return Response(twiml, media_type="application/xml")


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
    """One Twilio media stream: its token is the `token` `<Parameter>` of our TwiML."""
    line: PhoneLine = websocket.app.state.phone
    await run_media_stream(websocket, line, TwilioCodec(), token=from_parameter("token"))


def _peer(request: Request) -> str:
    return request.client.host if request.client is not None else "?"


def twilio_routes() -> list[BaseRoute]:
    """The phone routes (they answer 403 until the Twilio settings are given)."""
    return [
        Route("/twilio/{desk}/voice", voice_webhook, methods=["POST"]),
        Route("/twilio/{desk}/status", status_callback, methods=["POST"]),
        WebSocketRoute("/twilio/{desk}/stream", media_stream),
    ]
