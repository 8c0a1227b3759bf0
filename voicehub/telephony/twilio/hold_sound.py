"""A desk's own hold sound for a caller waiting in a Twilio conference while a warm transfer
rings: the desk's `[voice.sounds] hold` (one of voicehub's bundled sounds), served to Twilio.

    POST /twilio/{desk}/hold        the conference's waitUrl (signed): TwiML looping the sound
    GET  /twilio/{desk}/hold.wav    the sound: 8 kHz 16-bit mono WAV at the desk's `volume_db`

Twilio plays a waitUrl that is an audio file once; `<Play loop="0">` plays it until the
conference starts. The WAV holds no call data (a sound voicehub ships), so it is served to
any client; a desk without a hold sound gets 404 there. A transfer's own `hold_audio` URL
comes first (`hold_wait`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from voicehub.telephony.twilio.webhooks import signed_form
from voicehub.voice.audio import wav_bytes
from voicehub.voice.sounds.clips import sound_pcm

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.telephony.line import PhoneLine

__all__ = ["HOLD_RATE", "hold_routes", "hold_wait"]

HOLD_RATE = 8000
"""The rate the sound is served at: a phone line's (Twilio would resample a wideband file)."""


def _sound(desk: Desk | None) -> str | None:
    if desk is None:
        return None
    hold = desk.config.voice.sounds.hold
    return None if hold == "off" else hold


def hold_wait(line: PhoneLine, desk: Desk, hold_audio: str | None) -> tuple[str, str] | None:
    """The conference's waitUrl and waitMethod for a caller of `desk` put on hold:
    the transfer's `hold_audio` (GET), else the desk's hold sound (POST, signed), else None
    (Twilio's own music)."""
    if hold_audio:
        return hold_audio, "GET"
    if _sound(desk) is None:
        return None
    return line.public(f"/twilio/{desk.name}/hold"), "POST"


async def _hold_twiml(request: Request) -> Response:
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    line, _ = signed
    name = request.path_params["desk"]
    if _sound(line.desk(name)) is None:
        return PlainTextResponse(f"desk {name!r} has no hold sound\n", status_code=404)
    url = escape(line.public(f"/twilio/{name}/hold.wav"))
    play = f'<Play loop="0">{url}</Play>'
    twiml = f'<?xml version="1.0" encoding="UTF-8"?><Response>{play}</Response>'
    return Response(twiml, media_type="application/xml")


async def _hold_wav(request: Request) -> Response:
    line: PhoneLine = request.app.state.phone
    name = request.path_params["desk"]
    desk = line.desk(name)
    sound = _sound(desk)
    if desk is None or sound is None:
        return PlainTextResponse(f"desk {name!r} has no hold sound\n", status_code=404)
    pcm = sound_pcm(sound, HOLD_RATE, desk.config.voice.sounds.volume_db)
    return Response(wav_bytes(pcm, HOLD_RATE), media_type="audio/wav")


def hold_routes() -> list[BaseRoute]:
    return [
        Route("/twilio/{desk}/hold", _hold_twiml, methods=["POST"]),
        Route("/twilio/{desk}/hold.wav", _hold_wav, methods=["GET"]),
    ]
