"""The soak's view of the server's results: stored deliveries and live calls, over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx

__all__ = ["stored_deliveries", "undelivered", "wait_for_no_calls"]


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def stored_deliveries(
    server: str, desk: str, conversations: list[str], token: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Each conversation's delivery records, from the server's REST API."""
    headers = _headers(token)
    stored: dict[str, list[dict[str, Any]]] = {}
    async with httpx.AsyncClient(base_url=server, timeout=30, headers=headers) as http:
        for conversation in conversations:
            room = f"{desk}:{conversation}"
            response = await http.get("/api/deliveries", params={"room": room, "limit": 1000})
            response.raise_for_status()
            stored[conversation] = response.json()["deliveries"]
    return stored


async def undelivered(server: str, desk: str, conversation: str, token: str | None) -> int:
    """How many of `conversation`'s stored results are not delivered (yet)."""
    stored = await stored_deliveries(server, desk, [conversation], token)
    return sum(record["status"] != "delivered" for record in stored[conversation])


async def wait_for_no_calls(server: str, token: str | None, timeout: float = 120.0) -> int:
    """Wait until `/health` reports no live call; the calls still live after `timeout`
    (calls that never ended: their conversations cannot be called again)."""
    deadline = time.monotonic() + timeout
    live = 0
    async with httpx.AsyncClient(base_url=server, timeout=10, headers=_headers(token)) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):  # stalled: ask again
                live = int((await http.get("/health")).json().get("calls", 0))
            if live == 0:
                return 0
            await asyncio.sleep(0.5)
    return live
