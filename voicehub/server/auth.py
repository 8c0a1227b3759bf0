"""Access-token checks for calls and the REST API.

With no token configured (loopback only) everything is open. With one, a request must carry
it as `Authorization: Bearer <token>` or `?token=<token>` (browsers cannot set headers on a
WebSocket, hence the query). Comparison is constant-time. A request the access gate let in
with a scoped token (`voicehub.server.access_gate`) runs inside `granted()`: the check
passes it.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

if TYPE_CHECKING:
    from starlette.types import Scope

__all__ = ["granted", "presented_token", "scope_token", "token_problem"]

# Set by the access gate around the request (the route runs in its context): "granted"
# (a scoped token let it in), "closed" (tokens exist: no token is not open access), "".
_ACCESS: ContextVar[str] = ContextVar("voicehub_access", default="")


@contextmanager
def granted(state: str = "granted") -> Iterator[None]:
    """Inside: the request was let in by a scoped token (`token_problem` passes it), or,
    with `state="closed"`, it carries none while scoped tokens exist (it fails)."""
    mark = _ACCESS.set(state)
    try:
        yield
    finally:
        _ACCESS.reset(mark)


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
    access = _ACCESS.get()
    if access == "granted":
        return None
    if expected is None:
        if access == "closed":
            return "this server needs an access token: send `Authorization: Bearer <token>`"
        return None
    if presented is None:
        return "this server needs an access token: send `Authorization: Bearer <token>` or ?token="
    if not hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8")):
        return "the access token is not valid for this server"
    return None


def scope_token(scope: Scope) -> str | None:
    """`presented_token` of a raw ASGI scope (for middleware)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = bytes(value).decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    tokens: list[str] = query.get("token", [])
    return tokens[0] if tokens else None
