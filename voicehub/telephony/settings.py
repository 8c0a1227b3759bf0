"""The carriers' credentials besides Twilio's (whose live in `ServerSettings`).

Each carrier is set up when its webhook secret is given (the answer webhook is refused
with 403 otherwise); its REST API (hang-up, transfer, keypad tones, call-backs) also needs
the API credentials. `*_api_url` replaces the carrier's own REST address (a proxy, a fake).

    TELNYX_PUBLIC_KEY        the portal's Ed25519 public key (base64): verifies webhooks
    TELNYX_API_KEY           the REST API key (Bearer)
    TELNYX_ACCOUNT_SID       the TeXML account id and the TeXML application's id: the
    TELNYX_APPLICATION_ID    outbound calls of call-backs
    PLIVO_AUTH_ID            the account's auth id (REST, Basic)
    PLIVO_AUTH_TOKEN         its auth token: verifies V3 signatures, and the REST password
    VONAGE_SIGNATURE_SECRET  the account's signature secret: verifies the signed JWTs
    VONAGE_APPLICATION_ID    the Voice application's id (REST, with the private key)
    VONAGE_PRIVATE_KEY       the application's private key: PEM text, or a path to the file
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from voicehub.core.settings import settings_from_env

__all__ = ["CARRIER_VARIABLES", "CarrierSettings"]

_URL = r"^https?://[^?#\s]+$"

CARRIER_VARIABLES = {
    "telnyx_public_key": "TELNYX_PUBLIC_KEY",
    "telnyx_api_key": "TELNYX_API_KEY",
    "telnyx_api_url": "TELNYX_API_URL",
    "telnyx_account_sid": "TELNYX_ACCOUNT_SID",
    "telnyx_application_id": "TELNYX_APPLICATION_ID",
    "plivo_auth_id": "PLIVO_AUTH_ID",
    "plivo_auth_token": "PLIVO_AUTH_TOKEN",
    "plivo_api_url": "PLIVO_API_URL",
    "vonage_signature_secret": "VONAGE_SIGNATURE_SECRET",
    "vonage_application_id": "VONAGE_APPLICATION_ID",
    "vonage_private_key": "VONAGE_PRIVATE_KEY",
    "vonage_api_url": "VONAGE_API_URL",
}


class CarrierSettings(BaseModel):
    """Telnyx, Plivo and Vonage credentials (see the module for the variables)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    telnyx_public_key: str | None = None
    telnyx_api_key: str | None = None
    telnyx_api_url: str | None = Field(default=None, pattern=_URL)
    telnyx_account_sid: str | None = None
    telnyx_application_id: str | None = None
    plivo_auth_id: str | None = None
    plivo_auth_token: str | None = None
    plivo_api_url: str | None = Field(default=None, pattern=_URL)
    vonage_signature_secret: str | None = None
    vonage_application_id: str | None = None
    vonage_private_key: str | None = None
    vonage_api_url: str | None = Field(default=None, pattern=_URL)

    @classmethod
    def from_env(cls) -> CarrierSettings:
        """The settings the carriers' variables give (unset or empty: not set up)."""
        return settings_from_env(cls, CARRIER_VARIABLES, {}, what="carrier")
