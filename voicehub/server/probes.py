"""What a load balancer and Prometheus ask: `/ready` and `/metrics` (`/health` is in api).

    GET /ready     200 {"status": "ready", ...} when this instance should get calls (its
                   checks name the desks served and each desk file not served, with its
                   error: a broken desk does not stop the others); else
                   503 {"status": "not_ready", "reason": ..., "checks": {...}}: still
                   starting, draining (SIGTERM), busy (above its load or call limit, see
                   `voicehub.desks.call_admission`), or the store does not answer
    GET /metrics   the Prometheus text format (see `voicehub.server.metrics`)

`/ready` needs no token (balancers probe without one) but tells the details of a failing
check (which can name hosts) only to requests that would pass the API's token check.
`/metrics` needs the token like /api when one is configured.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from voicehub.server.app_state import broken_desks, parts_of, running_parts
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.metrics import CONTENT_TYPE

__all__ = ["STORE_PROBE_SECONDS", "probe_routes"]

STORE_PROBE_SECONDS = 2.0  # a store slower than this to answer counts as down


def _token_problem(request: Request) -> str | None:
    parts = running_parts(request.app)
    expected = parts.settings.token if parts is not None else None
    return token_problem(expected, presented_token(request.headers, request.query_params))


async def ready(request: Request) -> JSONResponse:
    """Readiness: started (models loaded when prewarming), not draining, store reachable."""
    parts = running_parts(request.app)
    checks: dict[str, Any] = {}
    reason = None
    if parts is None or not parts.ready:
        reason, checks["models"] = "starting", "loading"
    else:
        checks["models"] = "loaded" if parts.settings.prewarm else "loaded on first call"
        # ready all the same: the good desks serve; the broken files are named
        checks["desks"] = {
            "served": sorted(parts.runtime.desks),
            "broken": broken_desks(request.app),
        }
        if parts.drain.draining:
            reason = "draining"
        checks["draining"] = parts.drain.draining
        busy = parts.admission.busy()
        checks["load"] = parts.admission.meter.shares()
        if busy is not None:
            reason = reason or "busy"
            checks["busy"] = busy
        store = parts.runtime.hub.store
        try:
            async with asyncio.timeout(STORE_PROBE_SECONDS):
                await store.get_room("voicehub:ready")
            checks["store"] = "ok"
        except Exception as exc:
            reason = reason or "store unreachable"
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            checks["store"] = f"unreachable: {detail}"
    if reason is None:
        return JSONResponse({"status": "ready", "checks": checks})
    body: dict[str, Any] = {"status": "not_ready", "reason": reason}
    if _token_problem(request) is None:
        body["checks"] = checks
    return JSONResponse(body, status_code=503, headers={"Cache-Control": "no-store"})


async def metrics(request: Request) -> Response:
    """The Prometheus scrape."""
    problem = _token_problem(request)
    if problem is not None:
        headers = {"WWW-Authenticate": 'Bearer realm="voicehub"'}
        return JSONResponse({"error": "unauthorized", "message": problem}, 401, headers)
    return Response(parts_of(request).metrics.render(), media_type=CONTENT_TYPE)


def probe_routes() -> list[Route]:
    return [Route("/ready", ready), Route("/metrics", metrics)]
