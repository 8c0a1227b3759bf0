"""The telephony tools a desk grants its agents in their `tools`: `transfer_call` (with
`take_message` beside it) and `send_dtmf`.

Each answers with a JSON object the agent reads: `status` ("transferring", "sent",
"taken", or "refused"), `say` (what to tell the caller, in one sentence, which scripted
agents speak with `reply = "{result.say}"`) and, when refused, `error` (what was wrong).
A refusal leaves the caller on the line with the agent; `say` tells them so.

The call itself is reached through the hub's live-call registry (`live_calls`), by the
room id of the tool's context: a text room, or a call whose transport cannot do it, gets
a refusal naming why.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

from pydantic import Field

from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.tools.call_control import (
    DTMF_DIGITS,
    CallControlError,
    TransferMode,
    TransferPlan,
    TransferRequest,
    live_calls,
)

__all__ = [
    "MESSAGES_KEY",
    "TRANSFERS_KEY",
    "send_dtmf_tool",
    "take_message_tool",
    "transfer_call_tool",
]

MESSAGES_KEY = "messages"  # room metadata: the messages taken in the conversation
TRANSFERS_KEY = "transfers"  # room metadata: each transfer and its outcome
_MAX_MESSAGES = 50


def _refused(error: str, say: str) -> dict[str, Any]:
    return {"status": "refused", "error": error, "say": say}


def _unreached(metadata: dict[str, Any]) -> str:
    """Who the last transfer of the conversation failed to reach ("" if it did not fail)."""
    transfers = metadata.get(TRANSFERS_KEY)
    last = transfers[-1] if isinstance(transfers, list) and transfers else None
    if isinstance(last, dict) and last.get("outcome") not in ("connected", "handed over"):
        return str(last.get("target", ""))
    return ""


def transfer_call_tool(plan: TransferPlan) -> Tool:
    """`transfer_call` for a desk's `[transfer]` table."""

    async def transfer_call(
        target: Annotated[str, "A transfer target's name (such as billing), or a number."],
        context: ToolContext,
        mode: Annotated[
            TransferMode | None,
            "cold: connect the caller and leave; warm: brief the person first. "
            "Default: the desk's.",
        ] = None,
        summary: Annotated[
            str,
            Field(
                max_length=1000,
                description="For a warm transfer: who the caller is and what they need, "
                "in a sentence or two, told to the person before the caller is joined.",
            ),
        ] = "",
    ) -> dict[str, Any]:
        """Put the caller through to a person (a named transfer target). Tell the caller
        what the result's `say` says."""
        try:
            resolved = plan.resolve(target)
        except CallControlError as exc:
            return _refused(str(exc), f"{exc} You are still with me.")
        control = live_calls(context.hub).get(context.room_id) if context.hub else None
        if control is None:
            error = "there is no live call in this conversation to transfer"
            return _refused(error, f"I can't transfer this conversation: {error}.")
        request = TransferRequest(
            target=resolved,
            mode=mode or plan.mode,
            summary=summary.strip(),
            ring_timeout=plan.ring_timeout,
            hold_audio=plan.hold_audio,
            agent_id=context.agent_id,
        )
        try:
            say = await control.transfer(request)
        except CallControlError as exc:
            return _refused(str(exc), f"I can't put you through: {exc} You are still with me.")
        return {"status": "transferring", "target": resolved.name, "mode": request.mode, "say": say}

    return Tool(transfer_call)


def take_message_tool() -> Tool:
    """`take_message`: store the caller's message with the conversation (room metadata
    `messages` and a system event), readable in the REST view."""

    async def take_message(
        message: Annotated[str, Field(min_length=1, max_length=2000)],
        context: ToolContext,
        target: Annotated[str, "Who the message is for (a transfer target), if anyone."] = "",
    ) -> dict[str, Any]:
        """Take a message from the caller for a person who could not answer (after a
        transfer nobody picked up). Tell the caller what the result's `say` says."""
        hub = context.hub
        if hub is None or context.room_id not in hub.rooms:
            error = "there is no open conversation to keep the message with"
            return _refused(error, f"I can't take a message here: {error}.")
        room = hub.room(context.room_id)
        record = {
            "id": f"msg-{uuid.uuid4().hex[:12]}",
            "for": target.strip() or _unreached(room.metadata),
            "text": message.strip(),
            "agent": context.agent_id,
            "at": time.time(),
        }
        kept = [*room.metadata.get(MESSAGES_KEY, []), record][-_MAX_MESSAGES:]
        await room.set_metadata(**{MESSAGES_KEY: kept})
        addressee = f" for {record['for']}" if record["for"] else ""
        await hub.post(
            room.id,
            Event(
                kind=EventKind.SYSTEM,
                text=f"Message{addressee}: {record['text']}",
                source="take_message",
                source_type=ChannelType.SYSTEM,
                role="system",
                metadata={"message": record},
            ),
        )
        say = f"I've taken your message{addressee}. They will get back to you."
        return {"status": "taken", "id": record["id"], "say": say}

    return Tool(take_message)


def send_dtmf_tool() -> Tool:
    """`send_dtmf`: keypad tones on the caller's phone line (phone menus)."""

    async def send_dtmf(
        digits: Annotated[
            str,
            Field(
                pattern=f"^{DTMF_DIGITS.pattern}$",
                description="Keys to press in order: 0-9, *, #, A-D; w waits half a second.",
            ),
        ],
        context: ToolContext,
    ) -> dict[str, Any]:
        """Press keys on the phone line, as for a phone menu ("press 1 for sales")."""
        control = live_calls(context.hub).get(context.room_id) if context.hub else None
        if control is None:
            error = "there is no live phone call in this conversation"
            return _refused(error, f"I can't press keys: {error}.")
        try:
            say = await control.send_digits(digits)
        except CallControlError as exc:
            return _refused(str(exc), f"I can't press keys: {exc}")
        return {"status": "sent", "digits": digits, "say": say}

    return Tool(send_dtmf)
