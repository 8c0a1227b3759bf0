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

    from voicehub.desks.folder_scan import DeskScan
    from voicehub.server.parts import ServerParts

__all__ = ["broken_desks", "keep", "keep_scan", "parts_of", "running_parts"]


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


def keep_scan(app: Starlette, scan: DeskScan) -> None:
    """Keep the start-up scan of the desk folder (its broken files) for the probes."""
    app.state.desk_scan = scan


def broken_desks(app: Starlette) -> dict[str, str]:
    """The desk files not served, file -> error: as the latest `--reload` pass found them
    (a desk broken since serves its last good version), else as found at start-up."""
    parts = running_parts(app)
    reloader = parts.reloader if parts is not None else None
    if reloader is not None and reloader.last is not None:
        return dict(reloader.last.broken)
    scan: DeskScan | None = getattr(app.state, "desk_scan", None)
    return dict(scan.broken) if scan is not None else {}
