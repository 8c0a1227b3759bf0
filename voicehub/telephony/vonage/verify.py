"""Vonage webhook authenticity: a signed JWT in `Authorization: Bearer`.

Vonage signs Voice webhooks (answer and event) with a JWT (HS256) keyed with the account's
signature secret (`VONAGE_SIGNATURE_SECRET`). The signature is checked by the official SDK
(`vonage_jwt.verify_signature`); its `payload_hash` claim, the SHA-256 of the request's
body, is checked here when the request has one (a GET's parameters are in its signed URL
query, which TLS protects), and so is its age (`iat`, at most `MAX_AGE` seconds off).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

from voicehub.errors import MissingExtraError

__all__ = ["MAX_AGE", "vonage_signature_problem"]

MAX_AGE = 300.0


def vonage_signature_problem(
    body: bytes,
    headers: Mapping[str, str],
    secret: str | None,
    *,
    now: Callable[[], float] = time.time,
) -> str | None:
    """None if Vonage signed the request (`headers`, `body`), else why not."""
    if not secret:
        return "Vonage numbers are not set up: set VONAGE_SIGNATURE_SECRET and VOICEHUB_PUBLIC_URL"
    auth = headers.get("authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return "missing Authorization: Bearer <signed JWT>"
    try:
        import jwt
        from vonage_jwt import VonageVerifyJwtError, verify_signature
    except ImportError:
        raise MissingExtraError("vonage", "vonage") from None
    try:
        if not verify_signature(token, secret):
            return "the JWT's signature does not match VONAGE_SIGNATURE_SECRET"
    except VonageVerifyJwtError as exc:
        return f"the JWT is not valid: {exc}"
    claims = jwt.decode(token, options={"verify_signature": False})  # verified just above
    issued = claims.get("iat")
    if not isinstance(issued, int | float) or abs(now() - issued) > MAX_AGE:
        return f"the JWT's iat {issued!r} is missing or more than {MAX_AGE:g} s off"
    if body:
        digest = hashlib.sha256(body).hexdigest()
        if not hmac.compare_digest(str(claims.get("payload_hash", "")), digest):
            return "the JWT's payload_hash does not match the body"
    return None
