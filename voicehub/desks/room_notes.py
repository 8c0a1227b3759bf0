"""Writing what happened to a call into its conversation, live or not.

A transfer's outcome often arrives after the call's room left memory (the caller was put
through, their stream ended): the note reopens the stored room, appends the system event and
the metadata, and unloads it again unless a call of that conversation is live meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.tools.telephony import TRANSFERS_KEY

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.tools.call_control import TransferRequest

__all__ = ["append_to_list", "note_in_room", "record_transfer"]

_KEEP = 50  # entries a metadata list keeps (the newest)


async def note_in_room(
    hub: Hub,
    desk: Desk,
    room_id: str,
    text: str,
    *,
    source: str,
    metadata: dict[str, Any] | None = None,
    record: tuple[str, dict[str, Any]] | None = None,
    live: Callable[[str], bool] = lambda _: False,
) -> None:
    """Append a system event (`text`, `metadata`) to `room_id`, and `record` = (key, entry)
    to the room metadata list `key`. `live(room_id)` says whether a call holds the room (it
    stays loaded then)."""
    opened = room_id not in hub.rooms
    room = await hub.create_room(room_id, orchestration=desk.call_orchestration())
    try:
        if record is not None:
            key, entry = record
            await room.set_metadata(**{key: append_to_list(room.metadata.get(key), entry)})
        await hub.post(
            room_id,
            Event(
                kind=EventKind.SYSTEM,
                text=text,
                source=source,
                source_type=ChannelType.SYSTEM,
                role="system",
                metadata=metadata or {},
            ),
        )
    finally:
        if opened and not live(room_id):
            await hub.release_room(room_id)


def append_to_list(current: Any, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """`current` (a stored list, or nothing) with `entry` added, the newest `_KEEP` kept."""
    kept = list(current) if isinstance(current, list) else []
    return [*kept, entry][-_KEEP:]


async def record_transfer(
    hub: Hub,
    desk: Desk,
    room_id: str,
    request: TransferRequest,
    outcome: str,
    *,
    detail: str = "",
    live: Callable[[str], bool] = lambda _: False,
    **fields: Any,
) -> None:
    """Keep a transfer's outcome with the conversation: a system event ("Transfer to
    billing (warm): connected") and an entry of the room metadata list `transfers`."""
    target = request.target.name
    entry = {
        "target": target,
        "mode": request.mode,
        "outcome": outcome,
        "at": time.time(),
        **fields,
        **({"detail": detail} if detail else {}),
    }
    await note_in_room(
        hub,
        desk,
        room_id,
        f"Transfer to {target} ({request.mode}): {outcome}",
        source="transfer_call",
        metadata={"transfer": entry},
        record=(TRANSFERS_KEY, entry),
        live=live,
    )
