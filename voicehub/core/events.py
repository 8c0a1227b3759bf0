"""Events: the immutable records appended to a room, numbered per room."""

from __future__ import annotations

import itertools
import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventKind(StrEnum):
    """What an event records."""

    MESSAGE = "message"
    TRANSCRIPT = "transcript"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SYSTEM = "system"
    DELIVERY = "delivery"
    TASK = "task"


class ChannelType(StrEnum):
    """Kinds of channel an event can come from."""

    TEXT = "text"
    VOICE = "voice"
    WEBSOCKET = "websocket"
    AGENT = "agent"
    SYSTEM = "system"
    SMS = "sms"
    EMAIL = "email"


_ids = itertools.count(1)


def new_event_id() -> str:
    """A process-unique, sortable event id (rooms also number their events with `seq`)."""
    return f"ev-{time.time_ns():x}-{next(_ids)}"


class Event(BaseModel):
    """One immutable record in a room.

    `seq` is 0 until the room appends the event and gives it the next per-room number.
    Hooks that modify an event return a copy (`event.model_copy(update=...)`).
    """

    model_config = ConfigDict(frozen=True)

    kind: EventKind = EventKind.MESSAGE
    text: str = ""
    source: str = "user"
    source_type: ChannelType = ChannelType.TEXT
    role: str = "user"
    metadata: dict[str, Any] = Field(default_factory=dict)
    room_id: str = ""
    seq: int = 0
    id: str = Field(default_factory=new_event_id)
    created_at: float = Field(default_factory=time.time)

    @property
    def from_agent(self) -> bool:
        """True for events an agent produced (agents never answer agents in a room)."""
        return self.source_type is ChannelType.AGENT

    def with_metadata(self, **updates: Any) -> Event:
        """A copy with `updates` merged into metadata."""
        return self.model_copy(update={"metadata": {**self.metadata, **updates}})


def message(
    text: str,
    *,
    source: str = "user",
    role: str = "user",
    source_type: ChannelType = ChannelType.TEXT,
    **metadata: Any,
) -> Event:
    """Shorthand for a message event."""
    return Event(
        kind=EventKind.MESSAGE,
        text=text,
        source=source,
        role=role,
        source_type=source_type,
        metadata=metadata,
    )
