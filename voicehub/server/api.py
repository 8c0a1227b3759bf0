"""The read-only REST view of the server's store: desks, rooms, events, tasks, deliveries.

    GET /health                         liveness (no token needed); desks, live calls, memory
                                        and loop lag too when the token is sent (or none set)
    GET /api/desks                      the desks and their call URLs
    GET /api/rooms?desk=&parent=&limit= conversations (top-level unless `parent` is given)
    GET /api/rooms/{room_id}            one room with its tasks, deliveries and last events
    GET /api/rooms/{room_id}/events     the room's events (`?limit=` most recent)
    GET /api/tasks?room=                delegated work, optionally of one parent room
    GET /api/deliveries?room=&status=   the delivery outbox

Everything under /api needs the access token when one is configured (401 otherwise).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from voicehub.core.store.base import DeliveryStatus, RoomRecord
from voicehub.server.app_state import broken_desks, parts_of
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.loop_health import resident_mb

if TYPE_CHECKING:
    from voicehub.server.calls import Switchboard

__all__ = ["api_routes"]

Endpoint = Callable[[Request], Awaitable[JSONResponse]]
_DEFAULT_LIMIT = 100
_MAX_LIMIT = 1000


class BadRequest(Exception):
    """A query parameter is invalid; the message goes back with status 400."""


def _board(request: Request) -> Switchboard:
    return parts_of(request).board


def _dump(records: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(mode="json") if isinstance(r, BaseModel) else r for r in records]


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit")
    if raw is None:
        return _DEFAULT_LIMIT
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_LIMIT:
        raise BadRequest(f"limit={raw!r}: expected a whole number from 1 to {_MAX_LIMIT}")
    return int(raw)


def protected(endpoint: Endpoint) -> Endpoint:
    """Answer 401 unless the request carries the configured token; 400 on bad queries."""

    async def guarded(request: Request) -> JSONResponse:
        expected = _board(request).settings.token
        presented = presented_token(request.headers, request.query_params)
        problem = token_problem(expected, presented)
        if problem is not None:
            headers = {"WWW-Authenticate": 'Bearer realm="voicehub"'}
            return JSONResponse({"error": "unauthorized", "message": problem}, 401, headers)
        try:
            return await endpoint(request)
        except BadRequest as exc:
            return JSONResponse({"error": "bad_request", "message": str(exc)}, 400)

    guarded.__name__ = endpoint.__name__
    return guarded


async def health(request: Request) -> JSONResponse:
    """Liveness: answers as long as the event loop runs, without a token. The details
    (desks, live calls, memory, loop lag) go to requests that pass the token check: with
    a token set, an anonymous probe learns the status only."""
    board = _board(request)
    body: dict[str, Any] = {"status": "ok"}
    presented = presented_token(request.headers, request.query_params)
    if token_problem(board.settings.token, presented) is not None:
        return JSONResponse(body)
    body |= {"desks": sorted(board.desks), "calls": len(board.calls)}
    body["broken_desks"] = broken_desks(request.app)  # desk files not served, with errors
    body["rss_mb"] = round(resident_mb(), 1)
    # the worst loop lag since the last /health
    body["loop_lag_ms"] = parts_of(request).loop_health.read_lag_ms()
    return JSONResponse(body)


async def desks(request: Request) -> JSONResponse:
    board = _board(request)
    listed = [
        {
            "name": desk.name,
            "title": desk.title,
            "description": desk.config.description,
            "call_url": f"/desks/{desk.name}/call",
            "voice": desk.config.voice.model_dump(),
            "delivery": desk.config.delivery.model_dump(),
        }
        for desk in board.desks.values()
    ]
    return JSONResponse({"desks": listed})


async def rooms(request: Request) -> JSONResponse:
    board = _board(request)
    query = request.query_params
    parent = query.get("parent")
    found: list[RoomRecord] = await board.hub.store.list_rooms(parent_id=parent)
    if parent is None:
        found = [room for room in found if room.parent_id is None]
    desk = query.get("desk")
    if desk is not None:
        found = [room for room in found if room.id.startswith(f"{desk}:")]
    newest = sorted(found, key=lambda room: room.created_at, reverse=True)[: _limit(request)]
    listed = [{**room.model_dump(mode="json"), "live": room.id in board.calls} for room in newest]
    return JSONResponse({"rooms": listed})


async def room(request: Request) -> JSONResponse:
    board = _board(request)
    room_id = request.path_params["room_id"]
    store = board.hub.store
    record = await store.get_room(room_id)
    if record is None:
        return JSONResponse({"error": "not_found", "message": f"no room {room_id!r}"}, 404)
    return JSONResponse(
        {
            "room": {**record.model_dump(mode="json"), "live": room_id in board.calls},
            "children": _dump(await store.list_rooms(parent_id=room_id)),
            "tasks": _dump(await store.list_tasks(parent_room_id=room_id)),
            "deliveries": _dump(await store.list_deliveries(room_id=room_id)),
            "events": _dump(await store.recent_events(room_id, 50)),
        }
    )


async def events(request: Request) -> JSONResponse:
    board = _board(request)
    room_id = request.path_params["room_id"]
    if await board.hub.store.get_room(room_id) is None:
        return JSONResponse({"error": "not_found", "message": f"no room {room_id!r}"}, 404)
    found = await board.hub.store.recent_events(room_id, _limit(request))
    return JSONResponse({"events": _dump(found)})


async def tasks(request: Request) -> JSONResponse:
    board = _board(request)
    found = await board.hub.store.list_tasks(parent_room_id=request.query_params.get("room"))
    return JSONResponse({"tasks": _dump(found[-_limit(request) :])})


async def deliveries(request: Request) -> JSONResponse:
    board = _board(request)
    raw = request.query_params.get("status")
    statuses = None
    if raw is not None:
        try:
            statuses = [DeliveryStatus(part) for part in raw.split(",")]
        except ValueError:
            known = ", ".join(status.value for status in DeliveryStatus)
            raise BadRequest(f"status={raw!r}: expected one or more of {known}") from None
    found = await board.hub.store.list_deliveries(
        room_id=request.query_params.get("room"), statuses=statuses
    )
    return JSONResponse({"deliveries": _dump(found[-_limit(request) :])})


def api_routes() -> list[Route]:
    """The health endpoint and the read-only /api routes."""
    return [
        Route("/health", health),
        Route("/api/desks", protected(desks)),
        Route("/api/rooms", protected(rooms)),
        Route("/api/rooms/{room_id}", protected(room)),
        Route("/api/rooms/{room_id}/events", protected(events)),
        Route("/api/tasks", protected(tasks)),
        Route("/api/deliveries", protected(deliveries)),
    ]
