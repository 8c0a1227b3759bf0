"""What is said around a transfer, alike on every line (Twilio, LiveKit SIP): the briefing
the person hears before a warm transfer joins them with the caller, and what the agent tells
a caller nobody answered for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from voicehub.desks.held_results import held_for_caller, topics_of, topics_phrase

if TYPE_CHECKING:
    from voicehub.core.store.base import Store
    from voicehub.desks.desk import Desk
    from voicehub.tools.call_control import TransferRequest

__all__ = ["briefing", "nobody_line"]


async def briefing(store: Store, desk: Desk, room_id: str, request: TransferRequest) -> str:
    """The summary (the agent's, else the caller's last words) and the results waiting."""
    parts = [f"Hello, this is the {desk.title}, with a caller for you."]
    summary = request.summary or await _last_caller_words(store, room_id)
    if summary:
        parts.append(f"They said: {summary.rstrip('.')}.")
    held = held_for_caller(await store.list_deliveries(room_id=room_id))
    if held:
        parts.append(f"Results on {topics_phrase(topics_of(held))} are waiting for them.")
    parts.append("Connecting you now.")
    return " ".join(parts)


async def _last_caller_words(store: Store, room_id: str) -> str:
    events = await store.recent_events(room_id, 30)
    said = [e.text for e in events if e.role == "user" and e.text and e.kind == "transcript"]
    return said[-1] if said else ""


def nobody_line(target: str, outcome: str) -> str:
    """What the agent says when a transfer to `target` ended in `outcome` without anyone."""
    why = {
        "busy": f"the line at {target} is busy",
        "machine": f"{target} is not picking up",
        "api_error": f"I could not reach {target}",
        "failed": f"I could not reach {target}",
    }
    reason = why.get(outcome, f"nobody at {target} answered")
    return f"Sorry, {reason}. I can take a message for them, or help you with something else."
