"""Deleting a conversation over REST, with the same access token as the rest of /api.

    DELETE /api/rooms/{room_id}     the conversation, everything the store keys to it (rooms
                                    under it, events, tasks, deliveries with held results and
                                    sealed numbers, call records) and its recordings

Answers 200 with the counts deleted, 404 when there was nothing of it, 409 while a call is
on it (here or on another instance). Work still running for it here (workers of a call
that ended) is cancelled first, so no result lands in the deleted conversation.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from voicehub.server.api import protected
from voicehub.server.app_state import parts_of
from voicehub.server.erasure import ConversationEraser, ConversationLive

__all__ = ["conversation_routes"]


def eraser_of(request: Request) -> ConversationEraser:
    parts = parts_of(request)
    hub = parts.board.hub
    return ConversationEraser(hub.store, parts.recordings.folder, wall=hub.wall)


async def delete_conversation(request: Request) -> JSONResponse:
    room_id = request.path_params["room_id"]
    board = parts_of(request).board
    if room_id in board.calls:
        message = f"conversation {room_id!r} has a call in progress: end the call first"
        return JSONResponse({"error": "conflict", "message": message}, 409)
    hub = board.hub
    if room_id in hub.rooms:  # its workers still run: cancel them, no result may land later
        await hub.close_room(room_id)
    try:
        report = await eraser_of(request).delete(room_id)
    except ConversationLive as exc:
        return JSONResponse({"error": "conflict", "message": str(exc)}, 409)
    if not report.found:
        return JSONResponse({"error": "not_found", "message": f"no room {room_id!r}"}, 404)
    return JSONResponse({"deleted": report.summary()})


def conversation_routes() -> list[Route]:
    return [Route("/api/rooms/{room_id}", protected(delete_conversation), methods=["DELETE"])]
