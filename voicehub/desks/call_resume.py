"""Resuming a conversation's call on the instance that took it up.

The conversation itself needs nothing from here: the room's events are in the store (the
engine rebuilds the model's history from them at session start) and the agent in charge
after handoffs is in the room's metadata. What a resumed call adds:

- the caller was cut off (`Takeover.interrupted`): they hear `APOLOGY` first, then the
  question they were asked if it was still waiting for their answer (an ask_user question
  is recorded in the room as the agent's message; its answer is stamped with the question's
  id, see `voicehub.orchestration.ask_user`);
- the result that was being spoken on the lost instance is spoken again from the start (its
  lease is taken over at once, see `CallBook.lease_breakable`);
- the voice stack gets a `CallResume` (`CallSpec.resume`) saying how the call continues
  and which question is pending, for an engine that wants to act on it (pick the
  interview up where it stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from voicehub.core.events import EventKind

if TYPE_CHECKING:
    from voicehub.core.store.base import Store
    from voicehub.desks.call_book import Continuation

__all__ = ["APOLOGY", "CallResume", "pending_question"]

APOLOGY = "Sorry, I lost you for a moment."
"""What a caller cut off by a lost instance hears first on the instance that took them up."""

_SCAN = 50  # recent events searched for an unanswered question
_SPOKEN = (EventKind.MESSAGE, EventKind.TRANSCRIPT)


@dataclass(frozen=True)
class CallResume:
    """How a session starts on a call that continues another: `continuation` ("handover",
    "failover", "reconnect"), the instance it ran on, and the ask_user question still
    waiting for the caller's answer, if any (`question_id`, `question`)."""

    continuation: Continuation
    previous_owner: str
    question: str | None = None
    question_id: str | None = None

    @property
    def interrupted(self) -> bool:
        """Whether the caller was cut off (and hears `APOLOGY`)."""
        return self.continuation in ("failover", "reconnect")

    def words(self) -> str | None:
        """What the caller hears first on the resumed call (None: nothing)."""
        if not self.interrupted:
            return None
        return f"{APOLOGY} {self.question}" if self.question else APOLOGY


async def pending_question(store: Store, room_id: str) -> tuple[str, str] | None:
    """(event id, text) of the ask_user question the agent last asked in `room_id` if the
    caller has not answered it, else None."""
    events = await store.recent_events(room_id, _SCAN)
    answered = {str(e.metadata.get("_answer_to")) for e in events if e.metadata.get("_answer_to")}
    questions = {e.text for e in events if e.metadata.get("ask_user")}
    for event in reversed(events):
        if event.role != "assistant" or event.kind not in _SPOKEN:
            continue
        if event.metadata.get("ask_user"):
            return None if event.id in answered else (event.id, event.text)
        if event.kind is EventKind.TRANSCRIPT and event.text in questions:
            continue  # the question as it was spoken
        return None  # the agent said something else since its last question
    return None
