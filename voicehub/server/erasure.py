"""Deleting a conversation: everything the store keys to it and its recordings on disk.

    eraser = ConversationEraser(store, RecordingFolder(root), wall=time.time)
    report = await eraser.delete("research:cli-67b3f2e8e4")

A conversation with a call in progress is refused (`ConversationLive`): its call record is
open and the instance serving it still beats. The check reads the store, so it holds
across instances, and for the command line run beside a server; a call record whose owner
stopped beating is an abandoned call and does not block the deletion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from voicehub.errors import VoicehubError

if TYPE_CHECKING:
    from voicehub.core.store.base import Erasure, Store
    from voicehub.recordings.folder import RecordingFolder

__all__ = ["ConversationEraser", "ConversationLive", "ErasureReport"]

log = logging.getLogger("voicehub.privacy")


class ConversationLive(VoicehubError):
    """The conversation has a call in progress: end the call first."""


@dataclass(frozen=True)
class ErasureReport:
    """What a deletion removed: store records (`erasure`) and recording files."""

    room_id: str
    erasure: Erasure
    recording_files: int

    @property
    def found(self) -> bool:
        return self.erasure.found or self.recording_files > 0

    def summary(self) -> dict[str, object]:
        """The report as the REST answer and the command line show it."""
        erasure = self.erasure
        return {
            "room_id": self.room_id,
            "rooms": len(erasure.room_ids),
            "events": erasure.events,
            "tasks": erasure.tasks,
            "deliveries": erasure.deliveries,
            "calls": erasure.calls,
            "recording_files": self.recording_files,
        }


class ConversationEraser:
    """Deletes conversations from `store` and their recordings from `folder`."""

    def __init__(self, store: Store, folder: RecordingFolder, *, wall: Callable[[], float]) -> None:
        self.store = store
        self.folder = folder
        self.wall = wall

    async def live_owner(self, room_id: str) -> str | None:
        """The instance serving a call of the conversation now, or None."""
        call = await self.store.get_call(room_id)
        if call is None or not call.state.open:
            return None
        now = self.wall()
        for instance in await self.store.list_instances():
            if instance.id == call.owner and instance.expires_at > now:
                return call.owner
        return None

    async def delete(self, room_id: str) -> ErasureReport:
        """Delete the conversation; raises `ConversationLive` while a call is on it."""
        owner = await self.live_owner(room_id)
        if owner is not None:
            raise ConversationLive(
                f"conversation {room_id!r} has a call in progress on instance {owner!r}: "
                "end the call (or wait for the caller to hang up), then delete it"
            )
        erasure = await self.store.delete_conversation(room_id)
        files = 0
        for room in dict.fromkeys([room_id, *erasure.room_ids]):
            files += await asyncio.to_thread(self.folder.delete, room)
        report = ErasureReport(room_id, erasure, files)
        if report.found:
            log.info(
                "conversation %s deleted: %d rooms, %d events, %d tasks, %d deliveries, "
                "%d recording files",
                room_id,
                len(erasure.room_ids),
                erasure.events,
                erasure.tasks,
                erasure.deliveries,
                files,
            )
        return report
