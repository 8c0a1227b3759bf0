"""Access-token checks for calls and the REST API.

With no token configured (loopback only) everything is open. With one, a request must carry
it as `Authorization: Bearer <token>` or `?token=<token>` (browsers cannot set headers on a
WebSocket, hence the query). Comparison is constant-time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

__all__ = ["presented_token", "token_problem"]


def presented_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
    """The token a request carries: the bearer header first, then `?token=`."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    token = query.get("token")
    return token or None


def token_problem(expected: str | None, presented: str | None) -> str | None:
    """None if the request may proceed, else a message saying why not (no secret in it)."""
    if expected is None:
        return None
    if presented is None:
        return "this server needs an access token: send `Authorization: Bearer <token>` or ?token="
    if not hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8")):
        return "the access token is not valid for this server"
    return None
