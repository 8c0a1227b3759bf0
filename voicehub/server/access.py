"""Scoped access tokens: minted, checked, rotated and revoked, kept in the store (digests
only) so every instance sharing it accepts the same ones.

    tokens = AccessTokens(store, clock, wall=time.time)
    secret, record = await tokens.create(["desk:research"], name="kiosk")
    record = await tokens.check(secret)          # None: unknown, revoked or expired

A token reads `vh_<id>_<secret>`. Scopes: `admin` (everything: calls to every desk, the REST
view, deleting conversations), `read` (the REST view and the details of /health, /ready and
/metrics), `desk:<name>` (calls to that desk). Rotation gives the token a new secret; the
old one is still accepted for `grace` seconds. Checks read a copy of the tokens refreshed
every `refresh` seconds on `clock`: a revocation reaches every instance within that time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from voicehub.core.store.base import AccessTokenRecord
from voicehub.errors import ConfigError

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import Store

__all__ = ["PREFIX", "AccessTokens", "check_scopes", "covers"]

PREFIX = "vh_"
REFRESH_SECONDS = 5.0
_SCOPE = re.compile(r"admin|read|desk:[a-z0-9][a-z0-9_-]*")
_TOKEN = re.compile(r"vh_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})")


def check_scopes(scopes: Sequence[str]) -> list[str]:
    """The scopes, checked; ConfigError naming a bad one."""
    if not scopes:
        raise ConfigError("a token needs at least one scope: admin, read or desk:<name>")
    for scope in scopes:
        if not _SCOPE.fullmatch(scope):
            raise ConfigError(
                f"{scope!r} is not a scope: use admin, read or desk:<name> (a desk's name)"
            )
    return sorted(set(scopes))


def covers(scopes: Sequence[str], need: str) -> bool:
    """Whether a token with `scopes` may do what needs `need` ("read", "admin", "desk:x")."""
    return "admin" in scopes or need in scopes


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class AccessTokens:
    """The store's access tokens, with a refreshed copy for checks (see the module)."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        wall: Callable[[], float],
        refresh: float = REFRESH_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.wall = wall
        self.refresh = refresh
        self._copy: dict[str, AccessTokenRecord] = {}
        self._read_at: float | None = None

    async def _tokens(self) -> dict[str, AccessTokenRecord]:
        now = self.clock.now()
        if self._read_at is None or now - self._read_at >= self.refresh:
            self._copy = {token.id: token for token in await self.store.list_tokens()}
            self._read_at = now
        return self._copy

    def forget(self) -> None:
        """Read the store again at the next check (after a change made here)."""
        self._read_at = None

    async def any(self) -> bool:
        """Whether any token exists (then every call and API request needs one)."""
        return bool(await self._tokens())

    async def check(self, presented: str) -> AccessTokenRecord | None:
        """The token `presented` is, if it is one, valid now: not revoked, not expired."""
        match = _TOKEN.fullmatch(presented)
        if match is None:
            return None
        token = (await self._tokens()).get(match[1])
        if token is None:
            return None
        now = self.wall()
        if token.expires_at is not None and now >= token.expires_at:
            return None
        digest = _digest(match[2])
        if hmac.compare_digest(digest, token.digest):
            return token
        previous_ok = token.previous_until is not None and now < token.previous_until
        if previous_ok and hmac.compare_digest(digest, token.previous_digest):
            return token
        return None

    async def create(
        self, scopes: Sequence[str], *, name: str = "", expires_at: float | None = None
    ) -> tuple[str, AccessTokenRecord]:
        """A new token: its secret (shown once, never stored) and its record."""
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(24)
        record = AccessTokenRecord(
            id=token_id,
            name=name,
            scopes=check_scopes(scopes),
            digest=_digest(secret),
            created_at=self.wall(),
            expires_at=expires_at,
        )
        await self.store.save_token(record)
        self.forget()
        return f"{PREFIX}{token_id}_{secret}", record

    async def rotate(self, token_id: str, *, grace: float) -> tuple[str, AccessTokenRecord]:
        """A new secret for the token; the old one works `grace` seconds more."""
        token = next((t for t in await self.store.list_tokens() if t.id == token_id), None)
        if token is None:
            raise ConfigError(f"no access token {token_id!r}: `voicehub access list` lists them")
        secret = secrets.token_urlsafe(24)
        rotated = token.model_copy(
            update={
                "digest": _digest(secret),
                "previous_digest": token.digest,
                "previous_until": self.wall() + grace,
            }
        )
        await self.store.save_token(rotated)
        self.forget()
        return f"{PREFIX}{token_id}_{secret}", rotated

    async def revoke(self, token_id: str) -> bool:
        revoked = await self.store.delete_token(token_id)
        self.forget()
        return revoked
