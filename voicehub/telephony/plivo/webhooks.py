"""Phone calls through a Plivo application: the signed webhooks and the audio stream.

    POST /plivo/{desk}/answer            incoming call -> <Stream>, then <Redirect>
    POST /plivo/{desk}/status            stream status callbacks
    POST /plivo/{desk}/dial?to=...       a cold transfer's XML: <Dial> the target
    WS   /plivo/{desk}/stream/{token}    the audio stream (`voicehub.transports.plivo`)

Each webhook must carry a valid V3 signature (`voicehub.telephony.plivo.verify`), else 403.
The answer (Plivo XML, built with the SDK's `plivoxml`) asks for a bidirectional stream of
mu-law at 8 kHz; `extraHeaders` allows only letters and digits, so the one-use stream token
travels in the stream URL's path (the conversation, for the caller's side, in its query).
`keepCallAlive` holds the XML after the stream until it disconnects: the `<Redirect>` there
brings a call whose stream closed without a hang-up back to us (any instance), which takes
it up as on Twilio.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicehub.errors import MissingExtraError
from voicehub.telephony.answer import CALL_ID, answer_call
from voicehub.telephony.line import PhoneLine
from voicehub.telephony.media_stream import run_media_stream
from voicehub.telephony.plivo.verify import plivo_signature_problem
from voicehub.telephony.webhook_body import forbidden, form_of, read_body
from voicehub.tools.call_control import PHONE_NUMBER, SIP_URI
from voicehub.transports.plivo import PlivoCodec

__all__ = ["plivo_routes", "signed_form", "stream_xml"]

log = logging.getLogger("voicehub.telephony")

_HANG_UP = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


async def signed_form(request: Request) -> tuple[PhoneLine, dict[str, str]] | Response:
    """The form of a request Plivo signed for our public URL, or 403 saying why not."""
    line: PhoneLine = request.app.state.phone
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    params = form_of(body)
    url = line.public(request.url.path)
    if request.url.query:
        url += "?" + request.url.query
    problem = (
        "set VOICEHUB_PUBLIC_URL: Plivo signs the public URL it was given"
        if line.settings.public_url is None
        else plivo_signature_problem(
            request.method, url, params, request.headers, line.settings.carriers.plivo_auth_token
        )
    )
    if problem is not None:
        log.warning("refused %s: %s", request.url.path, problem)
        return forbidden(problem)
    return line, params


def stream_xml(line: PhoneLine, desk: str, conversation: str, token: str) -> str:
    """The Plivo XML streaming a call to desk, then back to us when the stream ends."""
    try:
        from plivo import plivoxml
    except ImportError:
        raise MissingExtraError("plivo", "plivo") from None
    response = plivoxml.ResponseElement()
    response.add(
        plivoxml.StreamElement(
            line.public(f"/plivo/{desk}/stream/{token}?conversation={conversation}", "wss"),
            bidirectional=True,
            audioTrack="inbound",
            contentType="audio/x-mulaw;rate=8000",
            keepCallAlive=True,
            statusCallbackUrl=line.public(f"/plivo/{desk}/status"),
            statusCallbackMethod="POST",
        )
    )
    response.add(plivoxml.RedirectElement(line.public(f"/plivo/{desk}/answer?resume=1")))
    return str(response.to_string(False))


async def answer_webhook(request: Request) -> Response:
    """Answer an incoming call: Plivo XML streaming it to the desk."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    desk = request.path_params["desk"]
    if desk not in line.board.desks:
        return PlainTextResponse(f"unknown desk {desk!r}\n", status_code=404)
    call_id = params.get("CallUUID", "")
    if not CALL_ID.fullmatch(call_id):
        return PlainTextResponse("bad CallUUID\n", status_code=400)
    answered = await answer_call(
        line,
        desk,
        call_id,
        caller=params.get("From", ""),
        called=params.get("To", ""),
        resume=request.query_params.get("resume") == "1",
        carrier="plivo",
    )
    if answered is None:
        return Response(_HANG_UP, media_type="application/xml")
    xml = stream_xml(line, desk, answered.conversation, answered.token)
    return Response(xml, media_type="application/xml")


async def status_callback(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    params = signed[1]
    log.info("plivo status for %s: %s", params.get("CallUUID", "?"), params.get("Event", "?"))
    return Response(status_code=204)


async def dial_webhook(request: Request) -> Response:
    """A cold transfer (`voicehub.telephony.plivo.control`): the caller's leg dials `to`."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    target = request.query_params.get("to", "")
    if not (PHONE_NUMBER.fullmatch(target) or SIP_URI.fullmatch(target)):
        return PlainTextResponse("bad transfer target\n", status_code=400)
    try:
        from plivo import plivoxml
    except ImportError:
        raise MissingExtraError("plivo", "plivo") from None
    dial = plivoxml.DialElement()
    if SIP_URI.fullmatch(target):
        dial.add(plivoxml.UserElement(target))
    else:
        dial.add(plivoxml.NumberElement(target.lstrip("+")))
    response = plivoxml.ResponseElement()
    response.add(dial)
    return Response(str(response.to_string(False)), media_type="application/xml")


async def media_stream(websocket: WebSocket) -> None:
    line: PhoneLine = websocket.app.state.phone
    token = websocket.path_params["token"]
    await run_media_stream(
        websocket, line, PlivoCodec(), token=lambda _: token, close_is_hang_up=True
    )


def plivo_routes() -> list[BaseRoute]:
    """The Plivo routes (they answer 403 until PLIVO_AUTH_TOKEN is set)."""
    return [
        Route("/plivo/{desk}/answer", answer_webhook, methods=["POST"]),
        Route("/plivo/{desk}/status", status_callback, methods=["POST"]),
        Route("/plivo/{desk}/dial", dial_webhook, methods=["POST"]),
        WebSocketRoute("/plivo/{desk}/stream/{token}", media_stream),
    ]
