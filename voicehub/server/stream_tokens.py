"""One-use, short-lived tokens that let a Twilio media stream into a call.

The signed voice webhook mints one and puts it in the TwiML's `<Parameter>`s; the media
stream WebSocket (which carries no signature we can check) must present it in its
`start` message. A token is 32 random bytes, kept in memory with what it grants; it works
once, within `ttl` seconds (Twilio connects the stream within a second or two).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from voicehub.core.clock import Clock, SystemClock

__all__ = ["StreamGrant", "StreamTokens"]


@dataclass(frozen=True, slots=True)
class StreamGrant:
    """What a stream token lets in: one call of `desk` in `conversation`."""

    desk: str
    conversation: str
    call_sid: str
    expires_at: float


class StreamTokens:
    """Mints and redeems stream tokens on `clock` (inject a virtual clock in tests)."""

    def __init__(self, clock: Clock | None = None, *, ttl: float = 60.0) -> None:
        self.clock = clock if clock is not None else SystemClock()
        self.ttl = ttl
        self._grants: dict[str, StreamGrant] = {}

    def mint(self, desk: str, conversation: str, call_sid: str) -> str:
        """A new token for one stream of `call_sid`."""
        now = self.clock.now()
        # Forget tokens Twilio never used, so the map cannot grow without bound.
        for token in [t for t, g in self._grants.items() if g.expires_at < now]:
            del self._grants[token]
        token = secrets.token_urlsafe(32)
        self._grants[token] = StreamGrant(desk, conversation, call_sid, now + self.ttl)
        return token

    def redeem(self, token: str | None) -> StreamGrant | str:
        """The grant of `token`, used up now; or why it is refused (no secret in it)."""
        if not token:
            return "the stream's start message carries no token parameter"
        grant = self._grants.pop(token, None)
        if grant is None:
            return "the stream token is unknown or was already used"
        if self.clock.now() > grant.expires_at:
            return f"the stream token expired ({self.ttl:g} s after the webhook minted it)"
        return grant

    def __len__(self) -> int:
        return len(self._grants)
