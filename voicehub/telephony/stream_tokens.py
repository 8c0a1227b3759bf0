"""One-use, short-lived tokens that let a Twilio media stream into a call.

The signed voice webhook mints one and puts it in the TwiML's `<Parameter>`s; the media
stream WebSocket (which carries no signature we can check) must present it in its `start`
message. The token is signed (HMAC-SHA256) under a secret every instance sharing the store
derives from the store's own secret, and carries what it grants and when it expires: behind
a load balancer the stream may reach another instance than the webhook did, and that one
checks it the same way. Each instance takes a token once, within `ttl` seconds (Twilio
connects the stream within a second or two).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.core.clock import Clock

__all__ = ["StreamGrant", "StreamTokens"]

_PURPOSE = b"voicehub twilio stream token"


@dataclass(frozen=True, slots=True)
class StreamGrant:
    """What a stream token lets in: one call of `desk` in `conversation`."""

    desk: str
    conversation: str
    call_sid: str
    expires_at: float


class StreamTokens:
    """Mints and redeems stream tokens. `secret` is shared by the instances (the store's
    secret: a token minted by one is redeemed by another); without one, a random secret of
    this instance's. `clock` tells the time (epoch seconds by default; a virtual clock in
    tests)."""

    def __init__(
        self, clock: Clock | None = None, *, ttl: float = 60.0, secret: bytes | None = None
    ) -> None:
        self.now: Callable[[], float] = clock.now if clock is not None else time.time
        self.ttl = ttl
        self._key = hmac.new(secret or secrets.token_bytes(32), _PURPOSE, hashlib.sha256).digest()
        self._used: dict[str, float] = {}  # signatures redeemed here -> when they expire

    def mint(self, desk: str, conversation: str, call_sid: str) -> str:
        """A new token for one stream of `call_sid`."""
        payload = {
            "d": desk,
            "c": conversation,
            "s": call_sid,
            "e": self.now() + self.ttl,
            "n": secrets.token_urlsafe(12),
        }
        body = _encode(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{self._sign(body)}"

    def redeem(self, token: str | None) -> StreamGrant | str:
        """The grant of `token`, used up now; or why it is refused (no secret in it)."""
        if not token:
            return "the stream's start message carries no token parameter"
        body, _, signature = token.partition(".")
        if not signature or not hmac.compare_digest(signature, self._sign(body)):
            return "the stream token is unknown (not signed by this deployment)"
        try:
            payload = json.loads(_decode(body))
            grant = StreamGrant(payload["d"], payload["c"], payload["s"], float(payload["e"]))
        except (ValueError, KeyError, TypeError):
            return "the stream token is malformed"
        now = self.now()
        for used in [s for s, expires in self._used.items() if expires < now]:
            del self._used[used]  # past their expiry they are refused anyway
        if signature in self._used:
            return "the stream token was already used"
        if now > grant.expires_at:
            return f"the stream token expired ({self.ttl:g} s after the webhook minted it)"
        self._used[signature] = grant.expires_at
        return grant

    def __len__(self) -> int:
        """Tokens remembered as used (until they expire)."""
        return len(self._used)

    def _sign(self, body: str) -> str:
        return _encode(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
