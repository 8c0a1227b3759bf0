"""The webhooks of call-backs on Telnyx, Plivo and Vonage (`voicehub.telephony.callback`
decides; these ask it and answer in the carrier's language). Each is signed as the
carrier's other webhooks are, and refused with 403 otherwise.

    POST /telnyx/{desk}/callback/{attempt}          TeXML, fetched once detection's verdict
                                                    (AnsweredBy) is in
    POST /telnyx/{desk}/callback/{attempt}/status   CallStatus (and a late AnsweredBy)
    POST /plivo/{desk}/callback/{attempt}           answered (Plivo hung up on a machine)
    POST /plivo/{desk}/callback/{attempt}/hangup    how it ended
    GET  /vonage/{desk}/callback/{attempt}          answered (Vonage hung up on a machine)
    POST /vonage/{desk}/callback/{attempt}/event    call events (status)

Plivo and Vonage end a call a machine answered themselves (`machine_detection="hangup"`), so
no voicemail is left there; Telnyx's TeXML gives the verdict as Twilio does, and a machine
gets the desk's voicemail.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape as xml_escape

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from voicehub.telephony.callback import (
    Answer,
    AwaitDetection,
    CallBacks,
    ConnectStream,
    LeaveVoicemail,
)
from voicehub.telephony.plivo.webhooks import signed_form as plivo_signed
from voicehub.telephony.plivo.webhooks import stream_xml
from voicehub.telephony.telnyx.webhooks import signed_form as telnyx_signed
from voicehub.telephony.telnyx.webhooks import stream_texml
from voicehub.telephony.vonage.webhooks import signed_request as vonage_signed
from voicehub.telephony.vonage.webhooks import stream_ncco

if TYPE_CHECKING:
    from voicehub.telephony.line import PhoneLine

__all__ = ["PLIVO_ENDED", "VONAGE_ENDED", "carrier_callback_routes"]

# How each carrier names the end of a call nobody answered, in `callback.ENDED`'s words.
PLIVO_ENDED = {
    "busy": "busy",
    "no-answer": "no-answer",
    "timeout": "no-answer",
    "failed": "failed",
    "cancel": "canceled",
    "completed": "completed",
}
VONAGE_ENDED = {
    "busy": "busy",
    "timeout": "no-answer",
    "unanswered": "no-answer",
    "failed": "failed",
    "rejected": "failed",
    "cancelled": "canceled",
    "completed": "completed",
    "machine": "machine",
}
_XML = "application/xml"


def _callbacks(request: Request) -> CallBacks | None:
    found: CallBacks | None = getattr(request.app.state, "callbacks", None)
    return found


def _xml(verbs: str) -> Response:
    body = f'<?xml version="1.0" encoding="UTF-8"?><Response>{verbs}</Response>'
    return Response(body, media_type=_XML)


def texml_of(line: PhoneLine, answer: Answer) -> Response:
    """A call-back's answer as TeXML."""
    if isinstance(answer, ConnectStream):
        return _xml(stream_texml(line, answer.desk, answer.conversation, answer.token))
    if isinstance(answer, LeaveVoicemail):
        return _xml(f"<Say>{xml_escape(answer.text)}</Say><Hangup/>")
    if isinstance(answer, AwaitDetection):
        return _xml(f'<Pause length="{answer.seconds}"/>')
    return _xml("<Hangup/>")


async def telnyx_answer(request: Request) -> Response:
    signed = await telnyx_signed(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    callbacks = _callbacks(request)
    if callbacks is None:
        return _xml("<Hangup/>")
    attempt = request.path_params["attempt"]
    answer = callbacks.answered(attempt, params.get("AnsweredBy", ""), params.get("CallSid", ""))
    return texml_of(line, answer)


async def telnyx_status(request: Request) -> Response:
    signed = await telnyx_signed(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    callbacks = _callbacks(request)
    if callbacks is None:
        return Response(status_code=204)
    attempt = request.path_params["attempt"]
    answered_by = params.get("AnsweredBy", "")
    if answered_by:  # synchronous detection's verdict: the call runs what we answer now
        answer = callbacks.detected(attempt, answered_by, params.get("CallSid", ""))
        if answer is not None:
            return texml_of(line, answer)
    callbacks.reported(attempt, params.get("CallStatus", ""))
    return Response(status_code=204)


async def plivo_answer(request: Request) -> Response:
    signed = await plivo_signed(request)
    if isinstance(signed, Response):
        return signed
    line, params = signed
    callbacks = _callbacks(request)
    answer = (
        callbacks.answered(request.path_params["attempt"], "human", params.get("CallUUID", ""))
        if callbacks is not None
        else None
    )
    if isinstance(answer, ConnectStream):
        return Response(
            stream_xml(line, answer.desk, answer.conversation, answer.token), media_type=_XML
        )
    return _xml("<Hangup/>")


async def plivo_hangup(request: Request) -> Response:
    signed = await plivo_signed(request)
    if isinstance(signed, Response):
        return signed
    params = signed[1]
    callbacks = _callbacks(request)
    status = PLIVO_ENDED.get(params.get("CallStatus", ""), "")
    if callbacks is not None and status:
        callbacks.reported(request.path_params["attempt"], status)
    return Response(status_code=204)


async def vonage_answer(request: Request) -> Response:
    signed = await vonage_signed(request)
    if isinstance(signed, Response):
        return signed
    line = signed[0]
    callbacks = _callbacks(request)
    call_id = request.query_params.get("uuid", "")
    answer = (
        callbacks.answered(request.path_params["attempt"], "human", call_id)
        if callbacks is not None
        else None
    )
    if isinstance(answer, ConnectStream):
        ncco = stream_ncco(line, answer.desk, call_id, answer.conversation, answer.token)
        return JSONResponse(ncco)
    return JSONResponse([{"action": "talk", "text": "Goodbye."}])


async def vonage_event(request: Request) -> Response:
    signed = await vonage_signed(request)
    if isinstance(signed, Response):
        return signed
    try:
        event = json.loads(signed[1] or b"{}")
    except ValueError:
        event = {}
    callbacks = _callbacks(request)
    status = VONAGE_ENDED.get(str(event.get("status", "")) if isinstance(event, dict) else "")
    if callbacks is not None and status:
        callbacks.reported(request.path_params["attempt"], status)
    return Response(status_code=204)


def carrier_callback_routes() -> list[BaseRoute]:
    """The call-back webhooks of Telnyx, Plivo and Vonage."""
    return [
        Route("/telnyx/{desk}/callback/{attempt}", telnyx_answer, methods=["POST"]),
        Route("/telnyx/{desk}/callback/{attempt}/status", telnyx_status, methods=["POST"]),
        Route("/plivo/{desk}/callback/{attempt}", plivo_answer, methods=["POST"]),
        Route("/plivo/{desk}/callback/{attempt}/hangup", plivo_hangup, methods=["POST"]),
        Route("/vonage/{desk}/callback/{attempt}", vonage_answer, methods=["GET"]),
        Route("/vonage/{desk}/callback/{attempt}/event", vonage_event, methods=["POST"]),
    ]
