"""Reading a carrier's webhook request: a bounded body, its form or query parameters."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

__all__ = ["MAX_WEBHOOK_BYTES", "forbidden", "form_of", "read_body"]

MAX_WEBHOOK_BYTES = 64_000  # carriers' webhooks are about 1 KB


async def read_body(request: Request) -> bytes | Response:
    """The request's raw body (signatures cover it byte for byte), or 413."""
    body = await request.body()
    if len(body) > MAX_WEBHOOK_BYTES:
        return PlainTextResponse("webhook body too big\n", status_code=413)
    return body


def form_of(body: bytes) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body as a dict (the last value of a key)."""
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def forbidden(problem: str) -> Response:
    return PlainTextResponse(f"forbidden: {problem}\n", status_code=403)
