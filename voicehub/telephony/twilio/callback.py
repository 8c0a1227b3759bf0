"""Call-backs on Twilio (`voicehub.telephony.callback` decides; this places and renders).

    POST /twilio/{desk}/callback/{attempt}          Twilio: the call-back was answered
    POST /twilio/{desk}/callback/{attempt}/amd      Twilio: who answered (asynchronous AMD)
    POST /twilio/{desk}/callback/{attempt}/status   Twilio: how the call-back ended

`TwilioCallBackDialer` places the call with the REST API (`calls.create` with asynchronous
answering-machine detection that waits for the end of a machine's greeting,
`DetectMessageEnd`). The answered call pauses while detection runs; its verdict then
redirects the call (REST) to the stream, the voicemail (`<Say>`, `<Hangup/>`) or a hang-up.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol
from xml.sax.saxutils import escape as xml_escape

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from voicehub.telephony.callback import (
    Answer,
    AwaitDetection,
    CallBacks,
    ConnectStream,
    DialBack,
    LeaveVoicemail,
)
from voicehub.telephony.twilio.rest import TwilioRest
from voicehub.telephony.twilio.webhooks import PhoneLine, signed_form, stream_twiml

if TYPE_CHECKING:
    from voicehub.telephony.line import PhoneSettings

__all__ = ["Dialer", "TwilioCallBackDialer", "callback_routes", "dialer_from", "twiml_of"]

log = logging.getLogger("voicehub.twilio")


class Dialer(Protocol):
    """What call-backs need of Twilio's REST API (`TwilioRest`)."""

    async def dial(
        self,
        *,
        to: str,
        from_: str,
        url: str,
        status_callback: str,
        machine_detection: str = "Enable",
        async_amd_callback: str | None = None,
        timeout: float = 30,
    ) -> str:
        """The new call's sid (raises when the API refuses the call)."""
        ...

    async def redirect(self, call_sid: str, twiml: str) -> None:
        """Make the live call run `twiml` now."""
        ...


def dialer_from(settings: PhoneSettings) -> TwilioRest | None:
    """The REST client the settings allow, or None (call-backs then stay off)."""
    sid, token = settings.twilio_account_sid, settings.twilio_auth_token
    if sid is None or token is None or settings.public_url is None:
        return None
    return TwilioRest(sid, token, api_url=settings.twilio_api_url)


class TwilioCallBackDialer:
    """`CallBackDialer` on Twilio's REST API, and the redirect of a call detection decided."""

    def __init__(self, rest: Dialer, line: PhoneLine) -> None:
        self.rest, self.line = rest, line

    async def dial_back(self, call: DialBack) -> str:
        path = f"/twilio/{call.desk}/callback/{call.attempt_id}"
        return await self.rest.dial(
            to=call.to,
            from_=call.from_,
            url=self.line.public(path),
            status_callback=self.line.public(path + "/status"),
            machine_detection="DetectMessageEnd",  # a machine's verdict at its beep
            async_amd_callback=self.line.public(path + "/amd"),
        )

    async def redirect(self, call_sid: str, answer: Answer) -> None:
        try:
            await self.rest.redirect(call_sid, twiml_of(self.line, answer))
        except Exception as exc:  # the callee hung up meanwhile: the status report settles it
            log.info("call-back %s: could not redirect it: %s", call_sid, exc)


def _twiml(verbs: str) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?><Response>{verbs}</Response>'


_HANG_UP = _twiml("<Hangup />")


def twiml_of(line: PhoneLine, answer: Answer) -> str:
    """A call-back's answer as TwiML."""
    if isinstance(answer, ConnectStream):
        return stream_twiml(line, answer.desk, answer.conversation, answer.token)
    if isinstance(answer, LeaveVoicemail):
        return _twiml(f"<Say>{xml_escape(answer.text)}</Say><Hangup />")
    if isinstance(answer, AwaitDetection):
        return _twiml(f'<Pause length="{answer.seconds}" />')
    return _HANG_UP


def _callbacks(request: Request) -> CallBacks | None:
    return getattr(request.app.state, "callbacks", None)


async def callback_answer(request: Request) -> Response:
    """Twilio fetches the TwiML of an answered call-back (AnsweredBy from its detection)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    attempt_id = request.path_params["attempt"]
    twiml = _HANG_UP
    if callbacks is not None:
        answered_by = params.get("AnsweredBy", "")
        answer = callbacks.answered(attempt_id, answered_by, params.get("CallSid", ""))
        twiml = twiml_of(signed[0], answer)
    return Response(twiml, media_type="application/xml")


async def callback_detected(request: Request) -> Response:
    """Asynchronous detection's verdict on an answered call-back (AnsweredBy)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    dialer = callbacks.dialers.get("twilio") if callbacks is not None else None
    if callbacks is not None and isinstance(dialer, TwilioCallBackDialer):
        call_sid = params.get("CallSid", "")
        attempt_id = request.path_params["attempt"]
        answer = callbacks.detected(attempt_id, params.get("AnsweredBy", "unknown"), call_sid)
        if answer is not None:
            callbacks.background(dialer.redirect(call_sid, answer))
    return Response(status_code=204)


async def callback_status(request: Request) -> Response:
    """How a call-back ended (no-answer, busy, failed, completed...)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    if callbacks is not None:
        callbacks.reported(request.path_params["attempt"], params.get("CallStatus", ""))
    return Response(status_code=204)


def callback_routes() -> list[BaseRoute]:
    return [
        Route("/twilio/{desk}/callback/{attempt}", callback_answer, methods=["POST"]),
        Route("/twilio/{desk}/callback/{attempt}/amd", callback_detected, methods=["POST"]),
        Route("/twilio/{desk}/callback/{attempt}/status", callback_status, methods=["POST"]),
    ]
