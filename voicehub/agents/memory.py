"""Conversation memory: which past events an agent sees, as chat messages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from voicehub.agents.llm import ChatMessage
from voicehub.core.events import Event, EventKind

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime

_SPOKEN = (EventKind.MESSAGE, EventKind.TRANSCRIPT, EventKind.DELIVERY)


class MemoryProvider(Protocol):
    async def messages(self, hub: Runtime, room_id: str, agent_id: str) -> list[ChatMessage]: ...


class SlidingWindowMemory:
    """The last `max_events` spoken events of the room (user, agents, deliveries).

    Reading the window is O(window), not O(history), so per-message cost stays flat as a
    conversation grows (the tail read widens only while tool events crowd it).
    """

    def __init__(self, max_events: int = 50) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be at least 1, got {max_events}")
        self.max_events = max_events

    async def messages(self, hub: Runtime, room_id: str, agent_id: str) -> list[ChatMessage]:
        # Tool calls and system events share the room, so the last `max_events` events may
        # hold fewer spoken ones: read a wider tail until the window is full or history ends.
        fetch = self.max_events
        while True:
            events = await hub.store.recent_events(room_id, fetch)
            spoken = [m for m in (event_to_message(e, agent_id) for e in events) if m is not None]
            if len(spoken) >= self.max_events or len(events) < fetch:
                return spoken[-self.max_events :]
            fetch *= 2


def event_to_message(event: Event, agent_id: str) -> ChatMessage | None:
    """How `agent_id` sees `event`: its own words as assistant, everyone else's as user."""
    if event.kind not in _SPOKEN or not event.text or event.metadata.get("partial"):
        return None
    if event.role == "user":
        return ChatMessage(role="user", content=event.text)
    if event.source == agent_id or event.kind is EventKind.DELIVERY:
        return ChatMessage(role="assistant", content=event.text)
    if event.role == "system":
        return ChatMessage(role="system", content=event.text)
    return ChatMessage(role="user", content=f"[{event.source}] {event.text}", name=None)
