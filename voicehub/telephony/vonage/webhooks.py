"""Phone calls through a Vonage Voice application: the signed webhooks and the WebSocket.

    GET  /vonage/{desk}/answer           incoming call -> NCCO `connect` to a websocket
    POST /vonage/{desk}/event            call events
    WS   /vonage/{desk}/stream/{token}   the audio (`voicehub.transports.vonage`)

Each webhook must carry a signed JWT (`voicehub.telephony.vonage.verify`), else 403. The
answer (an NCCO, sent as JSON: the SDK's models lack the websocket fields we need) connects
the call to a WebSocket of PCM16 at 16 kHz (the session's own rate: nothing is resampled),
the one-use stream token in the URL's path, and the call's uuid in the endpoint's headers
(they come back in `websocket:connected`).
"""

from __future__ import annotations

import logging
import re

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from voicehub.telephony.answer import CALL_ID, answer_call
from voicehub.telephony.line import PhoneLine
from voicehub.telephony.media_stream import run_media_stream
from voicehub.telephony.vonage.verify import vonage_signature_problem
from voicehub.telephony.webhook_body import forbidden, read_body
from voicehub.transports.vonage import CONTENT_TYPE, VonageCodec

__all__ = ["signed_request", "stream_ncco", "vonage_routes"]

log = logging.getLogger("voicehub.telephony")

_NUMBER = re.compile(r"\+?[0-9]{3,16}")


async def signed_request(request: Request) -> tuple[PhoneLine, bytes] | Response:
    line: PhoneLine = request.app.state.phone
    body = await read_body(request)
    if isinstance(body, Response):
        return body
    secret = line.settings.carriers.vonage_signature_secret
    problem = vonage_signature_problem(body, request.headers, secret)
    if problem is None and line.settings.public_url is None:
        problem = "set VOICEHUB_PUBLIC_URL: the WebSocket's address is given from it"
    if problem is not None:
        log.warning("refused %s: %s", request.url.path, problem)
        return forbidden(problem)
    return line, body


def stream_ncco(
    line: PhoneLine, desk: str, call_uuid: str, conversation: str, token: str
) -> list[dict[str, object]]:
    """The NCCO connecting call `call_uuid` to desk's WebSocket."""
    endpoint = {
        "type": "websocket",
        "uri": line.public(f"/vonage/{desk}/stream/{token}", scheme="wss"),
        "content-type": CONTENT_TYPE,
        "headers": {"call_uuid": call_uuid, "conversation": conversation},
    }
    return [{"action": "connect", "endpoint": [endpoint]}]


async def answer_webhook(request: Request) -> Response:
    """Answer an incoming call (a GET with `uuid`, `from`, `to`): the NCCO."""
    signed = await signed_request(request)
    if isinstance(signed, Response):
        return signed
    line = signed[0]
    desk = request.path_params["desk"]
    if desk not in line.board.desks:
        return PlainTextResponse(f"unknown desk {desk!r}\n", status_code=404)
    query = request.query_params
    call_id = query.get("uuid", "")
    if not CALL_ID.fullmatch(call_id):
        return PlainTextResponse("bad uuid\n", status_code=400)
    caller = query.get("from", "")
    answered = await answer_call(
        line,
        desk,
        call_id,
        caller=("+" + caller.lstrip("+")) if _NUMBER.fullmatch(caller) else caller,
        called=query.get("to", ""),
        resume=query.get("resume") == "1",
        carrier="vonage",
    )
    if answered is None:
        return JSONResponse([{"action": "talk", "text": "Goodbye."}])
    return JSONResponse(stream_ncco(line, desk, call_id, answered.conversation, answered.token))


async def event_webhook(request: Request) -> Response:
    signed = await signed_request(request)
    if isinstance(signed, Response):
        return signed
    log.info("vonage event: %s", signed[1][:200].decode("utf-8", "replace"))
    return Response(status_code=204)


async def media_stream(websocket: WebSocket) -> None:
    line: PhoneLine = websocket.app.state.phone
    token = websocket.path_params["token"]
    await run_media_stream(
        websocket, line, VonageCodec(), token=lambda _: token, close_is_hang_up=True
    )


def vonage_routes() -> list[BaseRoute]:
    """The Vonage routes (they answer 403 until VONAGE_SIGNATURE_SECRET is set)."""
    return [
        Route("/vonage/{desk}/answer", answer_webhook, methods=["GET"]),
        Route("/vonage/{desk}/event", event_webhook, methods=["POST"]),
        WebSocketRoute("/vonage/{desk}/stream/{token}", media_stream),
    ]
