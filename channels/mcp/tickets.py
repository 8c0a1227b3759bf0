"""The ticket system of the `tickets` example desk: a small MCP server on the official SDK.

The desk starts it over stdio (`command = ["python", "mcp/tickets.py"]` in
channels/tickets.toml); `python channels/mcp/tickets.py --http 8931` serves it over
streamable HTTP at http://127.0.0.1:8931/mcp instead. Tickets live in memory.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("tickets", log_level="WARNING")
_tickets: dict[str, dict[str, Any]] = {
    "1001": {"ticket_id": "1001", "status": "open", "subject": "the printer jams"},
    "1002": {"ticket_id": "1002", "status": "closed", "subject": "a password reset"},
}


@server.tool()
async def ticket_status(number: str) -> dict[str, Any]:
    """The status and subject of the support ticket with this number."""
    ticket = _tickets.get(number.strip().lstrip("#"))
    if ticket is None:
        raise ToolError(f"there is no ticket {number}")
    return ticket


@server.tool()
async def open_ticket(subject: str) -> dict[str, Any]:
    """Open a support ticket about `subject`; its number comes back."""
    number = str(1001 + len(_tickets))
    _tickets[number] = {"ticket_id": number, "status": "open", "subject": subject}
    return _tickets[number]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the tickets desk's MCP server")
    parser.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on this port")
    args = parser.parse_args()
    if args.http:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()
