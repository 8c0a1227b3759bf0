"""Twilio's webhooks for transfers (`voicehub.telephony.twilio.transfer`), signed like every
webhook.

POST /twilio/{desk}/transfer/{transfer}/person          the person's phone answered
POST /twilio/{desk}/transfer/{transfer}/person/status   how the person's call ended
POST /twilio/{desk}/transfer/{transfer}/conference      the conference's events
POST /twilio/{desk}/transfer/{transfer}/dialed          a cold transfer's <Dial action>

and the desk's hold sound a caller on hold hears (`voicehub.telephony.twilio.hold_sound`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from voicehub.telephony.twilio.hold_sound import hold_routes
from voicehub.telephony.twilio.transfer import HANG_UP, TwilioTransfers
from voicehub.telephony.twilio.webhooks import signed_form

__all__ = ["transfer_routes"]


def _transfers(request: Request) -> TwilioTransfers | None:
    return getattr(request.app.state, "transfers", None)


async def _person(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    transfers, twiml = _transfers(request), HANG_UP
    if transfers is not None:
        verdict = signed[1].get("AnsweredBy", "human")
        twiml = transfers.person_answered(request.path_params["transfer"], verdict)
    return Response(twiml, media_type="application/xml")


async def _person_status(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    transfers = _transfers(request)
    if transfers is not None:
        transfers.person_reported(request.path_params["transfer"], signed[1].get("CallStatus", ""))
    return Response(status_code=204)


async def _conference(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    transfers, params = _transfers(request), signed[1]
    if transfers is not None:
        transfers.conference_event(
            request.path_params["transfer"],
            params.get("StatusCallbackEvent", ""),
            params.get("CallSid", ""),
        )
    return Response(status_code=204)


async def _dialed(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    transfers, twiml = _transfers(request), HANG_UP
    if transfers is not None:
        status = signed[1].get("DialCallStatus", "failed")
        twiml = await transfers.dialed(request.path_params["transfer"], status)
    return Response(twiml, media_type="application/xml")


def transfer_routes() -> list[BaseRoute]:
    base = "/twilio/{desk}/transfer/{transfer}"
    return [
        Route(f"{base}/person", _person, methods=["POST"]),
        Route(f"{base}/person/status", _person_status, methods=["POST"]),
        Route(f"{base}/conference", _conference, methods=["POST"]),
        Route(f"{base}/dialed", _dialed, methods=["POST"]),
        *hold_routes(),
    ]
