"""The retention sweeper: conversations older than their desk's `[privacy] keep_days` are
deleted, everything of them (`ConversationEraser`: store records and recordings).

A conversation's age runs from its last activity: the latest of its room's creation and
closing, its last event, its deliveries' last change and its call record's. The sweep runs
at start and every `every` seconds on the injected clock. Several instances may sweep one
store: a deletion is idempotent (the second instance finds nothing), and a conversation
with a call in progress on any instance, or with work still running here, is skipped and
swept on a later pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from voicehub.errors import VoicehubError
from voicehub.server.erasure import ConversationLive

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import RoomRecord
    from voicehub.server.erasure import ConversationEraser

__all__ = ["DAY", "RetentionSweeper"]

log = logging.getLogger("voicehub.privacy")

DAY = 86400.0
SWEEP_EVERY = 3600.0  # seconds between two sweeps


class RetentionSweeper:
    """Deletes conversations past their desk's `keep_days`.

    `keep_days()` maps each desk to its `keep_days` (read at every sweep, so a reloaded
    desk file counts from its next sweep; 0 keeps); `busy(room_id)` says a conversation is
    in use here (a live call, workers running); `clock` paces the sweeps; the eraser's wall
    clock dates the conversations.
    """

    def __init__(
        self,
        eraser: ConversationEraser,
        keep_days: Callable[[], Mapping[str, float]],
        busy: Callable[[str], bool],
        clock: Clock,
        *,
        every: float = SWEEP_EVERY,
        on_sweep: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.eraser = eraser
        self.keep_days = keep_days
        self.busy = busy
        self.clock = clock
        self.every = every
        self.on_sweep = on_sweep  # told the ids each finished pass deleted
        self.deleted = 0  # conversations deleted since start
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="retention sweeper")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
            except VoicehubError as exc:  # the store is unreachable: try again next time
                log.warning("retention sweep failed, retried in %.0f s: %s", self.every, exc)
            await self.clock.sleep(self.every)

    async def sweep(self) -> list[str]:
        """One pass: delete every conversation past its desk's `keep_days`; their ids."""
        limits = {desk: days for desk, days in self.keep_days().items() if days > 0}
        if not limits:
            if self.on_sweep is not None:
                self.on_sweep([])
            return []
        store, now = self.eraser.store, self.eraser.wall()
        deleted: list[str] = []
        for room in await store.list_rooms():
            desk = room.id.partition(":")[0]
            if room.parent_id is not None or desk not in limits or self.busy(room.id):
                continue
            if now - await self._last_activity(room) < limits[desk] * DAY:
                continue
            try:
                await self.eraser.delete(room.id)
            except ConversationLive:
                continue  # a call came in meanwhile
            deleted.append(room.id)
        if deleted:
            self.deleted += len(deleted)
            log.info("retention: deleted %d conversations past keep_days", len(deleted))
        if self.on_sweep is not None:
            self.on_sweep(deleted)
        return deleted

    async def _last_activity(self, room: RoomRecord) -> float:
        store = self.eraser.store
        times = [room.created_at, room.closed_at or 0.0]
        times += [event.created_at for event in await store.recent_events(room.id, 1)]
        times += [d.updated_at for d in await store.list_deliveries(room_id=room.id)]
        call = await store.get_call(room.id)
        if call is not None:
            times.append(call.updated_at)
        return max(times)
