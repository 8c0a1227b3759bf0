"""A real MCP server, on the official SDK, for the MCP tests and the `mcp` bench keys.

    python -m voicehub_dev.fakes.mcp_server            # stdio
    python -m voicehub_dev.fakes.mcp_server --http     # streamable HTTP on 127.0.0.1, a free
                                                       #   port: prints "PORT <n>" when ready

Its tools: `echo`, `lookup_ticket` (a ticket as structured content), `fail` (raises: the
tool's error), `slow` (answers once `release` is called with its key, so a test decides when
it finishes without sleeping), `release`, `hang` (never answers; writes the server's pid to
`marker` first, so a test knows the call arrived before it kills the server) and `whoami`
(the pid and $FAKE_MCP_TOKEN, which a stdio server gets only through a desk's `env`). With
$FAKE_MCP_AUTHORIZATION set, the HTTP server answers 401 to requests whose Authorization
header is not that value.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

TICKETS = {
    "T-1001": {"ticket_id": "T-1001", "status": "open", "subject": "printer on fire"},
    "T-1002": {"ticket_id": "T-1002", "status": "closed", "subject": "password reset"},
}

server = MCPServer("voicehub-fake", log_level="WARNING")
_released: dict[str, anyio.Event] = {}


def _event(key: str) -> anyio.Event:
    return _released.setdefault(key, anyio.Event())


@server.tool()
async def echo(text: str) -> str:
    """Say `text` back."""
    return text


@server.tool()
async def lookup_ticket(ticket_id: str) -> dict[str, Any]:
    """The status and subject of a support ticket (T-1001, T-1002)."""
    ticket = TICKETS.get(ticket_id.upper())
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id}")
    return ticket


@server.tool()
async def fail(reason: str = "the database is on fire") -> str:
    """Always fails with `reason`."""
    raise ToolError(reason)


@server.tool()
async def slow(key: str) -> str:
    """Answers once `release(key)` is called."""
    await _event(key).wait()
    return f"released {key}"


@server.tool()
async def release(key: str) -> str:
    """Lets `slow(key)` answer."""
    _event(key).set()
    return "ok"


@server.tool()
async def hang(marker: str = "") -> str:
    """Never answers; writes this server's pid to the file `marker` first."""
    if marker:
        await anyio.Path(marker).write_text(str(os.getpid()))
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def whoami() -> dict[str, Any]:
    """The server's pid and the token it was given ($FAKE_MCP_TOKEN)."""
    return {"pid": os.getpid(), "token": os.environ.get("FAKE_MCP_TOKEN", "")}


def _http_app() -> Any:
    app = server.streamable_http_app()
    expected = os.environ.get("FAKE_MCP_AUTHORIZATION")
    if not expected:
        return app

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != expected:
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def _serve_http() -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    config = uvicorn.Config(_http_app(), log_level="warning", lifespan="on")
    # Listening already: a client connecting now waits in the backlog until uvicorn serves.
    print(f"PORT {port}", flush=True)
    anyio.run(uvicorn.Server(config).serve, [listener])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="streamable HTTP, not stdio")
    args = parser.parse_args(argv)
    if args.http:
        _serve_http()
    else:
        server.run()
    sys.exit(0)


if __name__ == "__main__":
    main()
