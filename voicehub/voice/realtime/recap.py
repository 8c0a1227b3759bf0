"""What a restored model session is told about the call so far.

A reconnected Realtime session starts with an empty conversation. We restore it with a
recap of the recent turns in the session's instructions, not with conversation items:
clients cannot create assistant audio items, and a history of assistant *text* items makes
the model drift into text answers; one `session.update` is also atomic, so no caller turn
lands in a half-restored conversation. The recap is short (the last turns, each clipped):
the model needs the thread of the call, not a transcript.
"""

from __future__ import annotations

from collections.abc import Sequence

from voicehub.core.events import Event, EventKind

__all__ = ["conversation_recap", "with_recap"]

RECAP_HEADER = (
    "Your connection to this call was lost and has been restored. Continue the call from "
    "where it was; do not greet the caller again. The call so far:"
)


def conversation_recap(history: Sequence[Event], *, turns: int = 12, clip: int = 300) -> str:
    """The last `turns` spoken turns and tool results of `history`, one line each."""
    lines: list[str] = []
    for event in history:
        text = " ".join(event.text.split())
        if not text:
            continue
        if len(text) > clip:
            text = text[: clip - 3] + "..."
        if event.kind is EventKind.TRANSCRIPT and event.role == "user":
            lines.append(f"Caller: {text}")
        elif event.kind is EventKind.TRANSCRIPT and event.role == "assistant":
            cut = " (cut off by the caller)" if event.metadata.get("interrupted") else ""
            lines.append(f"You{cut}: {text}")
        elif event.kind is EventKind.TOOL_RESULT:
            lines.append(f"Tool {event.metadata.get('tool', 'call')} returned: {text}")
    return "\n".join(lines[-turns:])


def with_recap(instructions: str, recap: str) -> str:
    """`instructions` followed by the recap (unchanged when there is none)."""
    if not recap:
        return instructions
    return f"{instructions}\n\n{RECAP_HEADER}\n{recap}"
