"""Plivo webhook authenticity: the V3 signature (HMAC-SHA256 with a nonce).

Plivo signs each request to our answer and callback URLs: `X-Plivo-Signature-V3` (one or
more base64 signatures, comma-separated) over the URL Plivo called and the form's
parameters, with `X-Plivo-Signature-V3-Nonce`, keyed with the auth token
(`PLIVO_AUTH_TOKEN`). The check is the official SDK's (`plivo.utils.validate_v3_signature`),
on the public URL Plivo was given (behind a tunnel the request's own host is not it).
"""

from __future__ import annotations

from collections.abc import Mapping

from voicehub.errors import MissingExtraError

__all__ = ["plivo_signature_problem"]


def plivo_signature_problem(
    method: str,
    url: str,
    params: Mapping[str, str],
    headers: Mapping[str, str],
    auth_token: str | None,
) -> str | None:
    """None if Plivo signed the request to `url` with `params`, else why not."""
    if not auth_token:
        return "Plivo numbers are not set up: set PLIVO_AUTH_TOKEN and VOICEHUB_PUBLIC_URL"
    signature = headers.get("x-plivo-signature-v3")
    nonce = headers.get("x-plivo-signature-v3-nonce")
    if not signature or not nonce:
        return "missing X-Plivo-Signature-V3 or its nonce"
    try:
        from plivo.utils import validate_v3_signature
    except ImportError:
        raise MissingExtraError("plivo", "plivo") from None
    if not validate_v3_signature(method, url, nonce, auth_token, signature, dict(params)):
        return f"X-Plivo-Signature-V3 does not match {url} (is VOICEHUB_PUBLIC_URL right?)"
    return None
