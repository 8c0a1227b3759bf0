"""Answering an incoming call, the same for every carrier: which conversation, and whether
a call coming back (`?resume=1`) goes on.

A carrier's answer webhook checks its signature, then asks `answer_call`: the call's
conversation (keyed to the caller's number where the desk says so, see
`voicehub.core.store.number_key`; else to the call id), the numbers remembered for a
call-back, and a one-use token for the media stream. A call coming back after its stream
closed (the carrier ran our redirect, or a survivor moved it) goes on unless it ended on
purpose: then the answer hangs up.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.telephony.line import PhoneLine

__all__ = ["CALL_ID", "Answered", "answer_call"]

log = logging.getLogger("voicehub.telephony")

CALL_ID = re.compile(r"[A-Za-z0-9:_-]{2,128}")  # Twilio sids, Telnyx "v3:..." ids, uuids


@dataclass(frozen=True, slots=True)
class Answered:
    """Connect the call to the desk's media stream, `token` letting the stream in."""

    desk: str
    conversation: str
    token: str


async def answer_call(
    line: PhoneLine,
    desk_name: str,
    call_id: str,
    *,
    caller: str,
    called: str,
    resume: bool,
    carrier: str,
) -> Answered | None:
    """How to answer call `call_id` to `desk_name` (a known desk) that came in through
    `carrier`; None: hang it up (it comes back after it ended on purpose)."""
    desk = line.board.desks[desk_name]
    conversation = None
    if desk.config.phone.conversation == "caller":
        conversation = await line.conversation_of(desk.name, caller)
    if conversation is None:
        conversation = "call-" + re.sub(r"[^A-Za-z0-9]", "", call_id)[-24:]
    if resume:
        record = await line.board.hub.store.get_call(f"{desk.name}:{conversation}")
        if record is None or not record.state.open:
            log.info("call %s: ended; hanging up after its stream", call_id)
            return None
        log.info("call %s: taking it up (%s on %s)", call_id, record.state, record.owner)
    else:
        if line.remember is not None and conversation.startswith("tel-"):
            line.remember(f"{desk.name}:{conversation}", caller, called, carrier)
        log.info("call %s to desk %s: conversation %s", call_id, desk.name, conversation)
    return Answered(desk.name, conversation, line.tokens.mint(desk.name, conversation, call_id))
