"""Telnyx webhook authenticity: an Ed25519 signature over `timestamp|body`.

Telnyx signs every webhook (TeXML form posts too) with the account's key: the headers
`telnyx-signature-ed25519` (base64, 64 bytes) and `telnyx-timestamp` (unix seconds). The
check is the official SDK's (`telnyx.lib.webhook_verification`, on PyNaCl), against the
portal's public key (`TELNYX_PUBLIC_KEY`); it refuses a timestamp more than 5 minutes off.
"""

from __future__ import annotations

from collections.abc import Mapping

from voicehub.errors import MissingExtraError

__all__ = ["telnyx_signature_problem"]


def telnyx_signature_problem(
    body: bytes, headers: Mapping[str, str], public_key: str | None
) -> str | None:
    """None if Telnyx signed `body` (with `headers`), else why not."""
    if not public_key:
        return "Telnyx numbers are not set up: set TELNYX_PUBLIC_KEY and VOICEHUB_PUBLIC_URL"
    try:
        from telnyx.lib.webhook_verification import (
            WebhookVerificationError,
            verify_webhook_signature,
        )
    except ImportError:
        raise MissingExtraError("telnyx", "telnyx") from None
    try:
        verify_webhook_signature(body, dict(headers), public_key)
    except WebhookVerificationError as exc:
        return f"Telnyx signature refused: {exc}"
    return None
