"""Phone calls through a Telnyx TeXML application: the signed webhooks and the stream.

    POST /telnyx/{desk}/voice    incoming call (TeXML form) -> <Connect><Stream>, <Redirect>
    POST /telnyx/{desk}/status   call and stream status callbacks
    WS   /telnyx/{desk}/stream   the media stream (`voicehub.transports.telnyx`)

Each webhook must carry a valid Ed25519 signature (`voicehub.telephony.telnyx.verify`): a
bad or missing one gets 403 and nothing runs. The answer asks for a bidirectional stream in
RTP mode with PCMU at 8 kHz both ways, the one-use stream token (and the conversation) as
`<Parameter>`s, which arrive in the start frame's `custom_parameters`. `<Connect>` is
synchronous: the `<Redirect>` after it runs when the stream's socket closes without a
hang-up (this instance died, or handed the call over while draining), and the instance it
reaches takes the call up, as on Twilio (`voicehub.telephony.twilio.webhooks`).
"""

from __future__ import annotations

import logging
from xml.sax.saxutils import quoteattr

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicehub.telephony.answer import CALL_ID, answer_call
from voicehub.telephony.line import PhoneLine
from voicehub.telephony.media_stream import from_parameter, run_media_stream
from voicehub.telephony.telnyx.verify import telnyx_signature_problem
from voicehub.telephony.webhook_body import forbidden, form_of, read_body
from voicehub.transports.telnyx import TelnyxCodec

__all__ = ["signed_form", "stream_texml", "telnyx_routes"]

log = logging.getLogger("voicehub.telephony")

_HANG_UP = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'


def _texml(verbs: str) -> Response:
    body = f'<?xml version="1.0" encoding="UTF-8"?><Response>{verbs}</Response>'
    return Response(body, media_type="application/xml")


async def signed_form(request: Request) -> tuple[PhoneLine, dict[str, str]] | Response:
    line: PhoneLine = request.app.state.phone
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    key = line.settings.carriers.telnyx_public_key
    problem = telnyx_signature_problem(body, request.headers, key)
    if problem is None and line.settings.public_url is None:
        problem = "set VOICEHUB_PUBLIC_URL: the stream's address is given from it"
    if problem is not None:
        log.warning("refused %s: %s", request.url.path, problem)
        return forbidden(problem)
    return line, form_of(body)


def stream_texml(line: PhoneLine, desk: str, conversation: str, token: str) -> str:
    """The TeXML connecting a call to desk's stream, then back to us when it closes."""
    url = line.public(f"/telnyx/{desk}/stream", scheme="wss")
    status = line.public(f"/telnyx/{desk}/status")
    resume = line.public(f"/telnyx/{desk}/voice?resume=1")
    return (
        f"<Connect><Stream url={quoteattr(url)} name={quoteattr('voicehub-' + desk)} "
        'bidirectionalMode="rtp" bidirectionalCodec="PCMU" bidirectionalSamplingRate="8000" '
        f'codec="PCMU" track="inbound_track" statusCallback={quoteattr(status)} '
        'statusCallbackMethod="POST">'
        f'<Parameter name="token" value={quoteattr(token)}/>'
        f'<Parameter name="conversation" value={quoteattr(conversation)}/>'
        f'</Stream></Connect><Redirect method="POST">{_text(resume)}</Redirect>'
    )


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def voice_webhook(request: Request) -> Response:
    """Answer an incoming call: TeXML connecting it to the desk's media stream."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    desk = request.path_params["desk"]
    if desk not in line.board.desks:
        return PlainTextResponse(f"unknown desk {desk!r}\n", status_code=404)
    call_id = params.get("CallSid", "")
    if not CALL_ID.fullmatch(call_id):
        return PlainTextResponse("bad CallSid\n", status_code=400)
    answered = await answer_call(
        line,
        desk,
        call_id,
        caller=params.get("From", ""),
        called=params.get("To", ""),
        resume=request.query_params.get("resume") == "1",
        carrier="telnyx",
    )
    if answered is None:
        return Response(_HANG_UP, media_type="application/xml")
    return _texml(stream_texml(line, desk, answered.conversation, answered.token))


async def status_callback(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    params = signed[1]
    status = params.get("StreamEvent") or params.get("CallStatus") or "?"
    log.info("telnyx status for %s: %s", params.get("CallSid", "?"), status)
    return Response(status_code=204)


async def media_stream(websocket: WebSocket) -> None:
    line: PhoneLine = websocket.app.state.phone
    await run_media_stream(websocket, line, TelnyxCodec(), token=from_parameter("token"))


def telnyx_routes() -> list[BaseRoute]:
    """The Telnyx routes (they answer 403 until TELNYX_PUBLIC_KEY is set)."""
    return [
        Route("/telnyx/{desk}/voice", voice_webhook, methods=["POST"]),
        Route("/telnyx/{desk}/status", status_callback, methods=["POST"]),
        WebSocketRoute("/telnyx/{desk}/stream", media_stream),
    ]
