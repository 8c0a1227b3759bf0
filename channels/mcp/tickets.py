"""The ticket system of the `tickets` example desk: a small MCP server on the official SDK.

The desk starts it over stdio (`command = ["python", "mcp/tickets.py"]` in
channels/tickets.toml); `python channels/mcp/tickets.py --http 8931` serves it over
streamable HTTP at http://127.0.0.1:8931/mcp instead. Tickets live in memory.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("tickets", log_level="WARNING")
_tickets: dict[str, dict[str, Any]] = {
    "1001": {"ticket_id": "1001", "status": "open", "subject": "the printer jams"},
    "1002": {"ticket_id": "1002", "status": "closed", "subject": "a password reset"},
}


_UNITS = {"oh": 0} | {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "  # noqa: SIM905
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    word: 10 * value
    for value, word in enumerate(
        "twenty thirty forty fifty sixty seventy eighty ninety".split(),  # noqa: SIM905
        2,
    )
}
_SCALES = ("hundred", "thousand")


def ticket_number(said: str) -> str:
    """The ticket number in what the caller said, as digits: '1001', '#1,001', and as a
    recognizer writes a number said aloud: 'one thousand one', 'one zero zero one', 'ten oh
    one'. Anything else comes back as it was (and is no ticket)."""
    text = said.strip().lstrip("#").replace(",", "").lower()
    if text.isdigit():
        return text
    words = [word for word in re.split(r"[\s-]+", text) if word and word != "and"]
    if not words or any(w not in _UNITS and w not in _TENS for w in words if w not in _SCALES):
        return said
    if any(word in _SCALES for word in words):  # "one thousand and one"
        total = current = 0
        for word in words:
            if word == "thousand":
                total, current = total + (current or 1) * 1000, 0
            elif word == "hundred":
                current = (current or 1) * 100
            else:
                current += _UNITS.get(word, 0) + _TENS.get(word, 0)
        return str(total + current)
    digits, index = "", 0  # said in groups: "ten oh one", "twenty five"
    while index < len(words):
        word = words[index]
        if word in _TENS and index + 1 < len(words) and 0 < _UNITS.get(words[index + 1], 0) < 10:
            digits += str(_TENS[word] + _UNITS[words[index + 1]])
            index += 2
            continue
        digits += str(_UNITS.get(word, _TENS.get(word)))
        index += 1
    return digits


@server.tool()
async def ticket_status(number: str) -> dict[str, Any]:
    """The status and subject of the support ticket with this number (digits, or the
    number in words as a caller says it)."""
    ticket = _tickets.get(ticket_number(number))
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
