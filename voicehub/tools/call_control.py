"""What the telephony tools need of a live call, and where they find it.

A tool runs with a `ToolContext` (the hub and the room id) and knows nothing of transports.
Each transport that can act on its call registers a `CallControl` for the call's room in the
hub's `LiveCalls` while the call is live:

- a Twilio call: the REST API on the call's sid (`voicehub.telephony.twilio.transfer`);
- a LiveKit SIP participant: livekit's SIP API (`voicehub.telephony.livekit_sip`);
- a browser or WebSocket caller: a handoff to another desk, the conversation kept
  (`voicehub.server.desk_transfer`); such a caller has no keypad line to send digits on.

    controls = live_calls(hub)
    forget = controls.register("triage:tel-1f2e", control)   # when the call starts
    ...
    forget()                                                  # when it ends

A control refuses what it cannot do with `CallControlError`, whose message is said to the
agent (and through it to the caller): what went wrong and what happens instead.
"""

from __future__ import annotations

import fnmatch
import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from voicehub.errors import VoicehubError

__all__ = [
    "DTMF_DIGITS",
    "PHONE_NUMBER",
    "SIP_URI",
    "CallControl",
    "CallControlError",
    "LiveCalls",
    "TransferMode",
    "TransferPlan",
    "TransferRequest",
    "TransferTarget",
    "live_calls",
]

TransferMode = Literal["cold", "warm"]

PHONE_NUMBER = re.compile(r"\+[1-9][0-9]{6,14}")  # E.164
SIP_URI = re.compile(r"sips?:[^@\s<>\"]+@[^\s<>\"]+")
# Digits a keypad sends; "w" is a half-second pause (Twilio's <Play digits> and livekit's
# SIP DTMF both take digits one by one, the pause is ours between them).
DTMF_DIGITS = re.compile(r"[0-9*#A-Dw]{1,64}")


class CallControlError(VoicehubError):
    """A control could not do what a tool asked; the message is for the agent to say."""


class TransferTarget(BaseModel):
    """Where a transfer goes: `phone` (an E.164 number or a SIP URI) for callers on a phone
    line, `desk` (another desk of this server) for browser and WebSocket callers."""

    model_config = ConfigDict(frozen=True)

    name: str
    phone: str | None = None
    desk: str | None = None

    @property
    def is_sip(self) -> bool:
        return self.phone is not None and SIP_URI.fullmatch(self.phone) is not None


class TransferRequest(BaseModel):
    """One `transfer_call`: where, how, and what the person taking the call is told."""

    model_config = ConfigDict(frozen=True)

    target: TransferTarget
    mode: TransferMode
    summary: str = ""
    ring_timeout: float = Field(default=20.0, gt=0)
    hold_audio: str | None = None
    agent_id: str = ""


@dataclass(frozen=True)
class TransferPlan:
    """A desk's `[transfer]` table as the tools use it (see `voicehub.desks.transfer`)."""

    targets: Mapping[str, TransferTarget]
    allow: tuple[str, ...] = ()
    mode: TransferMode = "warm"
    ring_timeout: float = 20.0
    hold_audio: str | None = None

    def resolve(self, target: str) -> TransferTarget:
        """The target named `target` (a name of `targets`, any case), or a number the desk
        allows (`allow` patterns); CallControlError says why not."""
        wanted = target.strip()
        for name, found in self.targets.items():
            if name.lower() == wanted.lower():
                return found
        number = re.sub(r"[\s().-]", "", wanted)
        if PHONE_NUMBER.fullmatch(number) or SIP_URI.fullmatch(wanted):
            address = number if PHONE_NUMBER.fullmatch(number) else wanted
            if any(fnmatch.fnmatchcase(address, pattern) for pattern in self.allow):
                return TransferTarget(name=address, phone=address)
            raise CallControlError(
                f"this desk does not allow transfers to {address}; {self._choices()}"
            )
        raise CallControlError(f"there is no transfer target called {wanted!r}; {self._choices()}")

    def _choices(self) -> str:
        names = ", ".join(self.targets)
        if not names:
            return "this desk has no transfer targets."
        return f"I can put the caller through to: {names}."


class CallControl(Protocol):
    """What a transport can do with its live call."""

    @property
    def kind(self) -> str:
        """ "twilio", "livekit-sip" or "browser": which kind of line this is."""
        ...

    async def transfer(self, request: TransferRequest) -> str:
        """Start the transfer (it proceeds once the agent's current reply has played);
        returns what the agent should tell the caller. Raises CallControlError."""
        ...

    async def send_digits(self, digits: str) -> str:
        """Send keypad tones on the line (after the agent's reply has played); returns what
        the agent should say. Raises CallControlError (no keypad line)."""
        ...


@dataclass
class LiveCalls:
    """The controls of one process's live calls, by room id."""

    _controls: dict[str, CallControl] = field(default_factory=dict)

    def register(self, room_id: str, control: CallControl) -> Callable[[], None]:
        """`control` acts on `room_id`'s call until the returned function is called (a
        newer call of the same conversation replaces it)."""
        self._controls[room_id] = control

        def forget() -> None:
            if self._controls.get(room_id) is control:
                del self._controls[room_id]

        return forget

    def get(self, room_id: str) -> CallControl | None:
        """The control of `room_id`'s live call, if it has one here."""
        return self._controls.get(room_id)

    def __len__(self) -> int:
        return len(self._controls)


_REGISTRIES: weakref.WeakKeyDictionary[object, LiveCalls] = weakref.WeakKeyDictionary()


def live_calls(runtime: object) -> LiveCalls:
    """The live-call registry of `runtime` (the hub a tool's context carries): one per hub,
    gone with it."""
    found = _REGISTRIES.get(runtime)
    if found is None:
        found = _REGISTRIES[runtime] = LiveCalls()
    return found
