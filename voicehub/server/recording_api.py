"""Recordings under the REST view, with the same access token as the rest of /api.

    GET    /api/rooms/{room_id}/recordings          the conversation's recorded calls
    GET    /api/rooms/{room_id}/recordings/{file}   a call's WAV (stereo: caller left,
                                                    agent right) or JSON transcript
    DELETE /api/rooms/{room_id}/recordings          delete them

The token may come as `?token=` (an `<audio>` element sends no header).
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from voicehub.server.app_state import parts_of
from voicehub.server.auth import presented_token, token_problem

if TYPE_CHECKING:
    from voicehub.recordings.folder import RecordingFolder

__all__ = ["recording_routes"]

Handler = Callable[[Request], Awaitable[Response]]
_TYPES = {".wav": "audio/wav", ".json": "application/json"}


def _guarded(handler: Handler) -> Handler:
    async def guarded(request: Request) -> Response:
        expected = parts_of(request).settings.token
        problem = token_problem(expected, presented_token(request.headers, request.query_params))
        if problem is not None:
            headers = {"WWW-Authenticate": 'Bearer realm="voicehub"'}
            return JSONResponse({"error": "unauthorized", "message": problem}, 401, headers)
        return await handler(request)

    guarded.__name__ = handler.__name__
    return guarded


def _folder(request: Request) -> RecordingFolder:
    return parts_of(request).recordings.folder


async def recordings(request: Request) -> Response:
    room_id = request.path_params["room_id"]
    found = await asyncio.to_thread(_folder(request).list, room_id)
    base = f"/api/rooms/{urllib.parse.quote(room_id, safe='')}/recordings"
    listed = [
        {
            "name": r.name,
            "started_at": r.started_at,
            "seconds": r.seconds,
            "audio_url": f"{base}/{r.name}.wav" if r.audio else None,
            "transcript_url": f"{base}/{r.name}.json" if r.transcript else None,
        }
        for r in found
    ]
    return JSONResponse({"room_id": room_id, "recordings": listed})


async def recording_file(request: Request) -> Response:
    room_id, name = request.path_params["room_id"], request.path_params["file"]
    path = await asyncio.to_thread(_folder(request).file, room_id, name)
    if path is None:
        message = f"no recording {name!r} in room {room_id!r}"
        return JSONResponse({"error": "not_found", "message": message}, 404)
    return FileResponse(path, media_type=_TYPES[path.suffix])


async def delete_recordings(request: Request) -> Response:
    room_id = request.path_params["room_id"]
    deleted = await asyncio.to_thread(_folder(request).delete, room_id)
    return JSONResponse({"room_id": room_id, "deleted_files": deleted})


def recording_routes() -> list[Route]:
    return [
        Route("/api/rooms/{room_id}/recordings", _guarded(recordings), methods=["GET"]),
        Route("/api/rooms/{room_id}/recordings", _guarded(delete_recordings), methods=["DELETE"]),
        Route("/api/rooms/{room_id}/recordings/{file}", _guarded(recording_file)),
    ]
