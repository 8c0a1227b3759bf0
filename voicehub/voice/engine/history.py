"""What the model reads of a call: the conversation so far, as chat messages.

At session start the history is rebuilt from the room's stored events (so a call resumed
later, or on another instance, goes on from what was said); during the call the engine adds
each turn, reply step and tool result as it happens. Everything said on the call by any
agent of the desk reads as the assistant's (a handoff keeps one conversation); tool calls
are kept only within the call (their stored pairs are not replayed: a chat API rejects a
call without its output). `messages()` is the most recent window, never cut between a tool
call and its outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.agents.llm import ChatMessage
from voicehub.core.events import Event, EventKind

if TYPE_CHECKING:
    from voicehub.core.store.base import Store

__all__ = ["CallHistory"]

_SPOKEN = (EventKind.TRANSCRIPT, EventKind.MESSAGE, EventKind.DELIVERY)


class CallHistory:
    """A call's conversation for the model (see the module docstring)."""

    def __init__(self, max_messages: int = 60) -> None:
        if max_messages < 2:
            raise ValueError(f"max_messages must be at least 2, got {max_messages}")
        self.max_messages = max_messages
        self._messages: list[ChatMessage] = []

    async def load(self, store: Store, room_id: str) -> None:
        """The room's recent spoken events, oldest first (before anything of this call)."""
        events = await store.recent_events(room_id, self.max_messages * 2)
        loaded = [m for m in map(_as_message, events) if m is not None]
        self._messages = loaded[-self.max_messages :] + self._messages

    def add(self, message: ChatMessage) -> None:
        self._messages.append(message)
        if len(self._messages) > 4 * self.max_messages:  # keep memory flat on long calls
            del self._messages[: len(self._messages) - 2 * self.max_messages]

    def add_user(self, text: str, *, continues: bool = False, at: int | None = None) -> None:
        """The caller's committed turn; `continues` joins it to the caller's last turn
        when nothing was said since (a pause the turn detector took for an end); `at` puts
        it at that `mark` (before a reply prepared for it)."""
        if at is not None:
            self._messages.insert(
                min(at, len(self._messages)), ChatMessage(role="user", content=text)
            )
            return
        last = self._messages[-1] if self._messages else None
        if continues and last is not None and last.role == "user":
            self._messages[-1] = ChatMessage(role="user", content=text)
            return
        self.add(ChatMessage(role="user", content=text))

    def mark(self) -> int:
        """Where the history ends now (`rollback` returns to it)."""
        return len(self._messages)

    def rollback(self, mark: int) -> None:
        """Forget what was added since `mark` (a prepared reply that was not used)."""
        del self._messages[min(mark, len(self._messages)) :]

    def messages(self) -> list[ChatMessage]:
        """The latest `max_messages`, starting at a message that is not a tool output."""
        window = self._messages[-self.max_messages :]
        while window and window[0].role == "tool":
            window = window[1:]
        return list(window)

    def __len__(self) -> int:
        return len(self._messages)


def _as_message(event: Event) -> ChatMessage | None:
    if event.kind not in _SPOKEN or not event.text or event.metadata.get("partial"):
        return None
    if event.role == "user":
        return ChatMessage(role="user", content=event.text)
    if event.role == "assistant" or event.kind is EventKind.DELIVERY:
        return ChatMessage(role="assistant", content=event.text)
    return None
