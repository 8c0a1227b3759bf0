"""Recordings under the REST view, with the same access token as the rest of /api.

    GET    /api/rooms/{room_id}/recordings          the conversation's recorded calls
    GET    /api/rooms/{room_id}/recordings/{file}   a call's WAV (stereo: caller left,
                                                    agent right) or JSON transcript
    DELETE /api/rooms/{room_id}/recordings          delete them

The token may come as `?token=` (an `<audio>` element sends no header). Files are sealed
on disk (`voicehub.recordings.seal`) and served opened, whole or by one byte range (an
`<audio>` element seeks by ranges); a file that does not open under the server's number
secret is a 500 naming the file and the secret.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from voicehub.recordings.seal import RecordingKeyError
from voicehub.server.app_state import parts_of
from voicehub.server.auth import presented_token, token_problem

if TYPE_CHECKING:
    from voicehub.recordings.folder import RecordingFolder

__all__ = ["recording_routes"]

Handler = Callable[[Request], Awaitable[Response]]
_TYPES = {".wav": "audio/wav", ".json": "application/json"}
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


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
    try:
        content = await asyncio.to_thread(_folder(request).read, room_id, name)
    except RecordingKeyError as error:
        return JSONResponse({"error": "recording_sealed", "message": str(error)}, 500)
    if content is None:
        message = f"no recording {name!r} in room {room_id!r}"
        return JSONResponse({"error": "not_found", "message": message}, 404)
    media_type = _TYPES[name[name.rindex(".") :]]
    wanted = _byte_range(request.headers.get("range"), len(content))
    if wanted is None:
        return Response(content, media_type=media_type, headers={"Accept-Ranges": "bytes"})
    first, last = wanted
    headers = {"Accept-Ranges": "bytes", "Content-Range": f"bytes {first}-{last}/{len(content)}"}
    return Response(content[first : last + 1], 206, headers, media_type)


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range `bytes=a-b`, `bytes=a-` or `bytes=-n` of `header` within `size`; None
    (the whole file) for no header, several ranges, or one that does not fit."""
    match = _RANGE.fullmatch(header.strip()) if header else None
    if match is None or size == 0:
        return None
    start, end = match.group(1), match.group(2)
    if start:
        first = int(start)
        last = min(int(end), size - 1) if end else size - 1
    elif end:
        first, last = max(size - int(end), 0), size - 1
    else:
        return None
    return (first, last) if first <= last else None


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
