"""The access gate: ASGI middleware that lets scoped access tokens (`voicehub.server.access`)
in where they reach, and keeps everyone else out once tokens exist.

| request | needs |
|---|---|
| WS `/desks/{desk}/call`, `/desks/{desk}/webrtc` | `desk:{desk}` |
| `GET /api/...` | `read` |
| any other method on `/api/...` (DELETE a conversation) | `admin` |
| `/health`, `/ready`, `/metrics` | none; `read` shows their details |

`admin` covers all. A scoped token that is unknown, revoked or expired is refused 401 (a
WebSocket call: error `unauthorized`, close 4401), one without the scope 403 (`forbidden`).
A request the gate lets in is marked (`voicehub.server.auth.granted`), so the routes' own
check of the shared token (`VOICEHUB_TOKEN`, which stays an admin token) passes it. Without
a scoped token a request goes on to that check as before, except that once any scoped
token exists and no shared token is set, such a request is refused: the server is no longer
open. Twilio and the other carriers' webhooks are signed by the carrier: not gated here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket

from voicehub.server.access import PREFIX, covers
from voicehub.server.auth import granted, scope_token
from voicehub.transports.websocket import CloseCode, ProtocolViolation, error_event

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from voicehub.server.access import AccessTokens

__all__ = ["AccessGate"]

_CALL = re.compile(r"/desks/([^/]+)/(?:call|webrtc)(?:/.*)?")
_DETAILS = ("/health", "/ready", "/metrics")


def _need(scope: Scope) -> str | None:
    """The scope a request needs ("" for the probes' details; None: not gated here)."""
    path = scope.get("path", "")
    call = _CALL.fullmatch(path)
    if call is not None:
        return f"desk:{call[1]}"
    if path.startswith("/api/"):
        return "read" if scope.get("method") in ("GET", "HEAD") else "admin"
    if path in _DETAILS:
        return ""
    return None


class AccessGate:
    """See the module. `tokens()` and `shared()` are the server's tokens and shared token
    (None until the server's parts are built: nothing is gated then)."""

    def __init__(
        self,
        app: ASGIApp,
        tokens: Callable[[], AccessTokens | None],
        shared: Callable[[], str | None],
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        need = _need(scope) if scope["type"] in ("http", "websocket") else None
        tokens = self.tokens() if need is not None else None
        if need is None or tokens is None:
            await self.app(scope, receive, send)
            return
        presented = scope_token(scope)
        if presented is not None and presented.startswith(PREFIX):
            token = await tokens.check(presented)
            if token is not None and covers(token.scopes, need or "read"):
                with granted():
                    await self.app(scope, receive, send)
            elif need and token is None:
                message = "the access token is unknown, revoked or expired"
                await _refuse(scope, receive, send, 401, "unauthorized", message)
            elif need and token is not None:
                message = f"the access token {token.id!r} does not reach this: it needs {need}"
                await _refuse(scope, receive, send, 403, "forbidden", message)
            else:  # a probe: it answers, without its details
                with granted("closed"):
                    await self.app(scope, receive, send)
            return
        if self.shared() is None and await tokens.any():
            if need:
                message = "this server needs an access token: send `Authorization: Bearer <token>`"
                await _refuse(scope, receive, send, 401, "unauthorized", message)
                return
            with granted("closed"):  # a probe: it answers, without its details
                await self.app(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
) -> None:
    if scope["type"] == "websocket":
        socket = WebSocket(scope, receive, send)
        await socket.accept()
        await socket.send_text(error_event(ProtocolViolation(code, message)).to_wire())
        await socket.close(CloseCode.UNAUTHORIZED, message[:120])
        return
    headers = {"WWW-Authenticate": 'Bearer realm="voicehub"'} if status == 401 else None
    await JSONResponse({"error": code, "message": message}, status, headers)(scope, receive, send)
