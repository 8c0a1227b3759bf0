"""Which desk a LiveKit job is for, and which conversation a participant continues (pure).

LiveKit dispatches a job to a worker by agent name (explicit dispatch). A worker started
for one desk (`voicehub worker --desk research`) registers that desk's name and takes only
its jobs. A worker for several desks registers one agent name (default "voicehub") and
reads the desk from the job: its dispatch metadata (`{"desk": "research"}`, as `voicehub
token` writes it, or just `research`), else the room name (`research` or `research-...`).

A conversation is keyed to the participant's identity, so a caller who comes back (to the
same room or a new one) hears the results held for them. An identity with characters a
conversation id cannot have is rewritten and given a short hash, so two different
identities never share a conversation.

A phone caller brought in by LiveKit SIP is keyed by their number (the participant's
`sip.phoneNumber` attribute), exactly as a Twilio caller is: the same hashed id
(`tel-...`), so a caller continues their conversation whichever way they phone in. A
withheld number, or a desk whose `[phone] conversation` is "call", gets a conversation of
its own for the call (from `sip.callID`), never one shared by all anonymous callers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = [
    "DEFAULT_AGENT_NAME",
    "DispatchError",
    "choose_desk",
    "conversation_for",
    "phone_conversation",
    "sip_conversation",
]

DEFAULT_AGENT_NAME = "voicehub"
"""Agent name of a worker that serves every desk."""

_CONVERSATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_NUMBER = re.compile(r"\+?[0-9]{3,16}")
_WITHHELD = ("266696687", "7378742833")  # carriers' stand-ins for "anonymous" / "restricted"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class DispatchError(Exception):
    """Why a job cannot be served here (the worker rejects it with this reason)."""

    reason: str

    def __str__(self) -> str:
        return self.reason


def choose_desk(desks: Collection[str], *, metadata: str, room_name: str) -> str:
    """The desk a job is for, from its dispatch `metadata` or else its `room_name`.

    `desks` are the desks this worker serves; with exactly one, every job is for it (and
    metadata naming another desk is an error, not a silent redirect).
    """
    named = _desk_in_metadata(metadata)
    if named is not None:
        if named not in desks:
            raise DispatchError(
                f"the job's metadata names desk {named!r}, which this worker does not serve "
                f"(desks: {', '.join(sorted(desks)) or 'none'})"
            )
        return named
    if len(desks) == 1:
        return next(iter(desks))
    for desk in sorted(desks, key=len, reverse=True):  # "sales-eu" before "sales"
        if room_name == desk or room_name.startswith((f"{desk}-", f"{desk}_", f"{desk}:")):
            return desk
    raise DispatchError(
        f'no desk for room {room_name!r}: put {{"desk": NAME}} in the dispatch metadata or '
        f"start the room name with the desk (desks: {', '.join(sorted(desks)) or 'none'})"
    )


def _desk_in_metadata(metadata: str) -> str | None:
    text = metadata.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DispatchError(f"the job's metadata is not valid JSON: {exc}") from None
        desk = parsed.get("desk") if isinstance(parsed, dict) else None
        if desk is None:
            return None
        if not isinstance(desk, str) or not desk:
            raise DispatchError(f"the job's metadata has desk {desk!r}: expected a desk name")
        return desk
    return text


def conversation_for(identity: str) -> str:
    """A conversation id (1-64 letters, digits, '.', '_', '-') for a participant identity."""
    if _CONVERSATION.fullmatch(identity):
        return identity
    digest = hashlib.sha256(identity.encode()).hexdigest()[:10]
    readable = _UNSAFE.sub("-", identity).strip("-._")[:50]
    return f"{readable}-{digest}" if readable else f"p-{digest}"


def phone_conversation(number: str) -> str | None:
    """The conversation id of a caller's number (None for a withheld or odd one): the same
    id `voicehub serve` gives a Twilio caller of that number (a test holds the two equal).
    A hash, so the store never holds the number."""
    digits = number.strip().replace(" ", "")
    if not _NUMBER.fullmatch(digits) or digits.lstrip("+") in _WITHHELD:
        return None
    normalized = "+" + digits.lstrip("+")
    return "tel-" + hashlib.sha256(f"voicehub caller {normalized}".encode()).hexdigest()[:24]


def sip_conversation(phone_number: str, call_id: str, *, per_caller: bool) -> str:
    """A SIP caller's conversation: by number when `per_caller` and the number is known,
    else one for this call (`call_id`: LiveKit's `sip.callID`, or any id unique to it)."""
    by_number = phone_conversation(phone_number) if per_caller else None
    return by_number or conversation_for(f"call-{call_id}")
