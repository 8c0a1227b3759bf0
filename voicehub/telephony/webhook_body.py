"""Reading a carrier's webhook request: a bounded body, its form or query parameters."""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response

__all__ = ["MAX_WEBHOOK_BYTES", "forbidden", "form_of", "read_body"]

log = logging.getLogger("voicehub.server")

MAX_WEBHOOK_BYTES = 64_000  # carriers' webhooks are about 1 KB


async def read_body(request: Request) -> bytes | Response:
    """The request's raw body (signatures cover it byte for byte); 413 if too big; 400 if
    the sender went away before sending it all. A carrier that drops its status callback
    as the call ends is no fault of the server: it gets an answer nobody reads, not an
    unhandled exception's traceback in the log."""
    try:
        body = await request.body()
    except ClientDisconnect:
        log.info("%s: the sender went away before its body arrived", request.url.path)
        return PlainTextResponse("the request's body did not arrive\n", status_code=400)
    if len(body) > MAX_WEBHOOK_BYTES:
        return PlainTextResponse("webhook body too big\n", status_code=413)
    return body


def form_of(body: bytes) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body as a dict (the last value of a key)."""
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def forbidden(problem: str) -> Response:
    return PlainTextResponse(f"forbidden: {problem}\n", status_code=403)
