"""Where a route finds the server's parts: `parts_of(request)` (see `voicehub.server.parts`).

The app's lifespan builds the parts and keeps them on `app.state` (`keep`): all of them as
`parts`, and the three the telephony layer's webhooks read by name (`phone`, `callbacks`,
`transfers`: that layer lies below the server and cannot import it). Kept apart from
`parts` so every route module can import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import HTTPConnection

    from voicehub.server.parts import ServerParts

__all__ = ["keep", "parts_of", "running_parts"]


def keep(app: Starlette, parts: ServerParts) -> None:
    """Put `parts` where the routes find them (see the module)."""
    app.state.parts = parts
    app.state.phone = parts.phone
    app.state.callbacks = parts.telephony.callbacks
    app.state.transfers = parts.telephony.transfers


def running_parts(app: Starlette) -> ServerParts | None:
    """The parts of a server whose lifespan has built them (None before)."""
    parts: ServerParts | None = getattr(app.state, "parts", None)
    return parts


def parts_of(connection: HTTPConnection) -> ServerParts:
    """The parts of the server a request or socket reached (no request comes in before the
    lifespan has built them)."""
    parts = running_parts(connection.app)
    assert parts is not None, "a request reached the server before its parts were built"
    return parts
