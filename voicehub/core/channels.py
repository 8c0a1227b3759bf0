"""Channels: how events enter and leave a room.

A channel instance may be bound to several rooms (a shared channel in a child room is the same
instance with its own binding). The room calls `on_event` for each broadcast event that the
channel did not itself produce. Channels that do slow work must not hold up the broadcast for
longer than their own reply takes.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from voicehub.core.events import ChannelType, Event, EventKind

if TYPE_CHECKING:
    from voicehub.core.room import Room


class Channel(ABC):
    """Base of every channel."""

    channel_type: ChannelType = ChannelType.TEXT

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id

    @abstractmethod
    async def on_event(self, event: Event, room: Room) -> None:
        """Receive an event broadcast in `room`."""

    async def on_attach(self, room: Room) -> None:  # noqa: B027 (optional hook)
        """Called when the channel is bound to `room`."""

    async def on_detach(self, room: Room) -> None:  # noqa: B027 (optional hook)
        """Called when the channel is unbound from `room` (or the room closes)."""


class TextChannel(Channel):
    """Drives a room by text: `send` posts what the user typed, `receive` yields replies.

    Outbound messages (from agents, system, deliveries) are queued per room so a test or a
    WebSocket writer can read them in order.
    """

    channel_type = ChannelType.TEXT

    def __init__(self, channel_id: str = "text") -> None:
        super().__init__(channel_id)
        self._outbox: dict[str, asyncio.Queue[Event]] = {}

    def _queue(self, room_id: str) -> asyncio.Queue[Event]:
        queue = self._outbox.get(room_id)
        if queue is None:
            queue = self._outbox[room_id] = asyncio.Queue()
        return queue

    async def send(self, room: Room, text: str, **metadata: object) -> Event | None:
        """Post a user message into `room` as this channel."""
        event = Event(
            kind=EventKind.MESSAGE,
            text=text,
            source=self.channel_id,
            source_type=self.channel_type,
            role="user",
            metadata=dict(metadata),
        )
        return await room.post(event)

    async def on_event(self, event: Event, room: Room) -> None:
        if event.kind in (EventKind.MESSAGE, EventKind.DELIVERY) and event.role != "user":
            self._queue(room.id).put_nowait(event)

    async def receive(self, room_id: str) -> Event:
        """The next outbound message in `room_id` (waits for one)."""
        return await self._queue(room_id).get()

    def pending(self, room_id: str) -> list[Event]:
        """Take every outbound message queued so far, without waiting."""
        queue = self._queue(room_id)
        taken: list[Event] = []
        while not queue.empty():
            taken.append(queue.get_nowait())
        return taken

    async def on_detach(self, room: Room) -> None:
        self._outbox.pop(room.id, None)
