"""Rooms: one conversation each. A room numbers its events, broadcasts them to its channels
and runs the broadcast hooks around them."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from voicehub.core.channels import Channel
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.store.base import RoomRecord, RoomStatus
from voicehub.core.store.outage import STORE_OUTAGE_SECONDS, retry_unavailable
from voicehub.core.trusted import replace
from voicehub.errors import RoomClosedError, StoreUnavailableError

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime

log = logging.getLogger("voicehub.room")


class Room:
    """A live room. Create rooms with `Hub.create_room`, not directly."""

    def __init__(self, hub: Runtime, record: RoomRecord, last_seq: int = 0) -> None:
        self.hub = hub
        self.id = record.id
        self.parent_id = record.parent_id
        self.created_at = record.created_at
        self.metadata: dict[str, Any] = dict(record.metadata)
        self.status = record.status
        self.channels: dict[str, Channel] = {}
        self._seq = last_seq

    @property
    def is_open(self) -> bool:
        return self.status is RoomStatus.OPEN

    @property
    def last_seq(self) -> int:
        return self._seq

    def record(self) -> RoomRecord:
        return RoomRecord(
            id=self.id,
            parent_id=self.parent_id,
            status=self.status,
            metadata=dict(self.metadata),
            created_at=self.created_at,
            closed_at=time.time() if not self.is_open else None,
        )

    async def attach(self, channel: Channel) -> None:
        """Bind `channel` to this room (it will receive broadcasts)."""
        self.channels[channel.channel_id] = channel
        await channel.on_attach(self)

    async def detach(self, channel_id: str) -> None:
        channel = self.channels.pop(channel_id, None)
        if channel is not None:
            await channel.on_detach(self)

    async def set_metadata(self, **updates: Any) -> None:
        """Merge `updates` into the room metadata and persist it."""
        self.metadata.update(updates)
        await self.hub.store.update_room(self.record())

    async def post(self, event: Event) -> Event | None:
        """Append `event` and broadcast it. Returns the stored event, or None if a
        BEFORE_BROADCAST hook blocked it. A store unavailable for a while (a Redis restart,
        a locked file) is waited for, up to `STORE_OUTAGE_SECONDS`: a passing outage must
        not fail a worker's task."""
        if self.status is not RoomStatus.OPEN:
            raise RoomClosedError(closed_message(self.id))
        hooks = self.hub.hooks
        if hooks.has(HookTrigger.BEFORE_BROADCAST, self.id):
            if event.room_id != self.id:  # hooks see the event as it will be stored
                event = event.model_copy(update={"room_id": self.id})
            outcome = await hooks.run(
                HookTrigger.BEFORE_BROADCAST,
                event,
                HookContext(self.hub, self.id, HookTrigger.BEFORE_BROADCAST),
            )
            if outcome.blocked:
                log.info(
                    "event %s blocked in room %s by %s: %s",
                    event.id,
                    self.id,
                    outcome.blocked_by,
                    outcome.reason,
                )
                return None
            event = outcome.event
        # Number the event before any await so concurrent posts keep their order.
        self._seq += 1
        event = replace(event, seq=self._seq, room_id=self.id)
        store = self.hub.store
        try:
            await store.append_event(event)
        except StoreUnavailableError as exc:  # retried as it is: stored once (same id, seq)
            await retry_unavailable(
                self.hub.clock,
                lambda: store.append_event(event),
                exc,
                what=f"event {event.seq} of room {self.id}",
                limit=STORE_OUTAGE_SECONDS,
            )
        for channel in list(self.channels.values()):
            if channel.channel_id == event.source:
                continue
            try:
                await channel.on_event(event, self)
            except Exception:  # one broken channel must not silence the others
                log.exception(
                    "channel %s failed on event %s in room %s",
                    channel.channel_id,
                    event.id,
                    self.id,
                )
        if hooks.has(HookTrigger.AFTER_BROADCAST, self.id):
            await hooks.run(
                HookTrigger.AFTER_BROADCAST,
                event,
                HookContext(self.hub, self.id, HookTrigger.AFTER_BROADCAST),
            )
        return event


def closed_message(room_id: str) -> str:
    return (
        f"room {room_id!r} is closed: reopen it with hub.create_room({room_id!r}) "
        "or open a new room to continue"
    )
