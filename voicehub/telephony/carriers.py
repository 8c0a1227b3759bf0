"""Every carrier's routes, for the server to mount (Twilio's are in `twilio.webhooks`)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from voicehub.telephony.plivo.webhooks import plivo_routes
from voicehub.telephony.telnyx.webhooks import telnyx_routes
from voicehub.telephony.vonage.webhooks import vonage_routes

__all__ = ["CARRIERS", "carrier_routes"]

CARRIERS = ("twilio", "telnyx", "plivo", "vonage")


def carrier_routes() -> list[BaseRoute]:
    """The webhooks and media streams of Telnyx, Plivo and Vonage numbers."""
    return [*telnyx_routes(), *plivo_routes(), *vonage_routes()]
