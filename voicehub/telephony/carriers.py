"""Every carrier's routes, for the server to mount (Twilio's are in `twilio.webhooks`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from starlette.routing import BaseRoute

from voicehub.telephony.control import CarrierCalls
from voicehub.telephony.plivo.webhooks import plivo_routes
from voicehub.telephony.settings import CarrierSettings
from voicehub.telephony.telnyx.webhooks import telnyx_routes
from voicehub.telephony.twilio.takeover import CallRedirector
from voicehub.telephony.vonage.webhooks import vonage_routes

__all__ = [
    "CARRIERS",
    "carrier_calls",
    "carrier_redirectors",
    "carrier_routes",
    "load_verifiers",
    "voice_path",
]

CARRIERS = ("twilio", "telnyx", "plivo", "vonage")


def carrier_routes() -> list[BaseRoute]:
    """The webhooks and media streams of Telnyx, Plivo and Vonage numbers, and their
    call-backs' webhooks."""
    from voicehub.telephony.carrier_callbacks import carrier_callback_routes

    return [*telnyx_routes(), *plivo_routes(), *vonage_routes(), *carrier_callback_routes()]


def carrier_calls(
    settings: CarrierSettings, public: Callable[[str], str]
) -> dict[str, CarrierCalls]:
    """The REST call control of each carrier whose API credentials are set."""
    calls: dict[str, CarrierCalls] = {}
    if settings.telnyx_api_key:
        from voicehub.telephony.telnyx.control import TelnyxCalls

        calls["telnyx"] = TelnyxCalls(
            settings.telnyx_api_key,
            public,
            api_url=settings.telnyx_api_url,
            account_sid=settings.telnyx_account_sid,
            application_id=settings.telnyx_application_id,
        )
    if settings.plivo_auth_id and settings.plivo_auth_token:
        from voicehub.telephony.plivo.control import PlivoCalls

        calls["plivo"] = PlivoCalls(
            settings.plivo_auth_id,
            settings.plivo_auth_token,
            public,
            api_url=settings.plivo_api_url,
        )
    if settings.vonage_application_id and settings.vonage_private_key:
        from voicehub.telephony.vonage.control import VonageCalls

        calls["vonage"] = VonageCalls(
            settings.vonage_application_id,
            settings.vonage_private_key,
            public,
            api_url=settings.vonage_api_url,
        )
    return calls


def voice_path(carrier: str, desk: str) -> str:
    """The webhook a call of `carrier` to `desk` comes back to (`resume=1`: it goes on)."""
    if carrier == "plivo":
        return f"/plivo/{desk}/answer?resume=1"
    return f"/{carrier}/{desk}/voice?resume=1"  # Twilio's, and Telnyx's TeXML


def carrier_redirectors(calls: dict[str, CarrierCalls]) -> dict[str, CallRedirector]:
    """The carriers among `calls` whose REST API can redirect a live call to our webhook
    (fail-over): Telnyx (with TELNYX_ACCOUNT_SID) and Plivo. Vonage cannot."""
    from voicehub.telephony.plivo.control import PlivoCalls
    from voicehub.telephony.telnyx.control import TelnyxCalls

    found: dict[str, CallRedirector] = {}
    telnyx, plivo = calls.get("telnyx"), calls.get("plivo")
    if isinstance(telnyx, TelnyxCalls) and telnyx.account_sid:
        found["telnyx"] = telnyx
    if isinstance(plivo, PlivoCalls):
        found["plivo"] = plivo
    return found


def load_verifiers(settings: CarrierSettings) -> None:
    """Import the SDK modules that check the set-up carriers' webhooks now, at start-up: the
    telnyx package alone takes seconds to import, which the first call's webhook must not
    wait for (the carrier gives up on a slow answer). A missing extra fails here, naming it."""
    from voicehub.errors import MissingExtraError

    wanted = {
        "telnyx": ("telnyx.lib.webhook_verification", "nacl.signing"),
        "plivo": ("plivo.utils", "plivo.xml"),
        "vonage": ("vonage_jwt", "jwt"),
    }
    given = {
        "telnyx": settings.telnyx_public_key,
        "plivo": settings.plivo_auth_token,
        "vonage": settings.vonage_signature_secret,
    }
    for carrier, modules in wanted.items():
        if not given[carrier]:
            continue
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError:
                raise MissingExtraError(carrier, carrier) from None
