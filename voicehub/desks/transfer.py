"""The `[transfer]` table of a desk file: where `transfer_call` may put a caller through.

[transfer]
mode = "warm"            # transfer_call's default: "warm" briefs the person first, "cold" does not
ring_timeout = 20        # seconds the person's phone rings before the agent comes back
hold_audio = "https://example.com/hold.mp3"   # what a caller on hold hears (Twilio's waitUrl:
                         #   an audio file or TwiML); Twilio's own hold music without it
allow = ["+1555*"]       # numbers the agent may name itself (glob patterns); none by default
sip_trunk = "ST_..."     # LiveKit SIP: the outbound trunk that dials warm transfers

[transfer.targets]       # names the agent uses; each a number or SIP URI, or a table
billing = "+15550100300"
pbx = "sip:sales@pbx.example.com"
support = { phone = "+15550100400", desk = "frontdesk" }   # browser callers go to a desk

A phone caller (Twilio, LiveKit SIP) is put through to the target's `phone`; a browser or
WebSocket caller, who has no phone line, to its `desk` (the conversation comes along), and
a target without one of them is refused to the agent, who says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field, field_validator, model_validator

from voicehub.desks.sections import PositiveSeconds, Slug, StrictModel
from voicehub.errors import ConfigError
from voicehub.tools.call_control import PHONE_NUMBER, SIP_URI, TransferPlan, TransferTarget

__all__ = ["DeskLike", "TargetConfig", "TransferConfig", "check_transfer_desks"]

_HTTPS = r"^https://[^/?#\s]+(/\S*)?$"


def _phone_problem(value: str) -> str | None:
    if PHONE_NUMBER.fullmatch(value) or SIP_URI.fullmatch(value):
        return None
    return (
        f"{value!r} is neither a phone number in E.164 form (+ and 7-15 digits, such as "
        "+15550100300) nor a SIP URI (sip:user@host)"
    )


class TargetConfig(StrictModel):
    """One transfer target: a phone number or SIP URI, and/or a desk of this server."""

    phone: str | None = None
    """The number (E.164, such as +15550100300) or SIP URI (sip:user@host) phone callers are
    put through to."""
    desk: Slug | None = None
    """The desk of this server browser and WebSocket callers are handed to (the
    conversation kept)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"phone": data} if isinstance(data, str) else data

    @field_validator("phone")
    @classmethod
    def _dialable(cls, value: str | None) -> str | None:
        if value is not None and (problem := _phone_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _somewhere(self) -> TargetConfig:
        if self.phone is None and self.desk is None:
            raise ValueError("give the target a phone (number or SIP URI), a desk, or both")
        return self


class DeskLike(Protocol):
    """What the cross-desk check reads of a desk file (`DeskConfig`)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> Path | None: ...
    @property
    def transfer(self) -> TransferConfig | None: ...


class TransferConfig(StrictModel):
    """Where the desk's agents may transfer callers (`transfer_call`)."""

    targets: dict[Slug, TargetConfig] = Field(min_length=1)
    """The names the agent transfers to: `[transfer.targets]`, each a number, a SIP URI, or
    `{ phone = "...", desk = "..." }`."""
    mode: Literal["cold", "warm"] = "warm"
    """`transfer_call`'s default: `warm` briefs the person before joining them with the
    caller, `cold` puts the caller straight through."""
    ring_timeout: PositiveSeconds = Field(default=20.0, le=120.0)
    """Seconds the person's phone rings before the agent comes back to the caller (at most
    120)."""
    hold_audio: str | None = Field(default=None, pattern=_HTTPS)
    """What a Twilio caller on hold hears: an https URL of an audio file or TwiML (Twilio's
    waitUrl); Twilio's own hold music when unset."""
    allow: tuple[str, ...] = ()
    """Numbers or SIP URIs the agent may name itself, as glob patterns (`+1555*`); none by
    default."""
    sip_trunk: str | None = Field(default=None, min_length=1)
    """LiveKit SIP: the outbound trunk (`ST_...`) that calls the person for warm transfers."""

    @field_validator("allow")
    @classmethod
    def _patterns(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            number = re.fullmatch(r"\+[0-9*?]{1,15}", value)
            if not (number or value.startswith(("sip:", "sips:"))):
                raise ValueError(
                    f"allow pattern {value!r} must look like a number (+15550100*) or a "
                    "SIP URI (sip:*@pbx.example.com)"
                )
        return values

    def plan(self) -> TransferPlan:
        """The table as `transfer_call` uses it."""
        return TransferPlan(
            targets={
                name: TransferTarget(name=name, phone=target.phone, desk=target.desk)
                for name, target in self.targets.items()
            },
            allow=self.allow,
            mode=self.mode,
            ring_timeout=self.ring_timeout,
            hold_audio=self.hold_audio,
        )


def check_transfer_desks(desks: Mapping[str, DeskLike]) -> None:
    """Every transfer target's `desk` must be a desk loaded with it (`desks` by name);
    ConfigError names the file and the field of the first that is not."""
    for desk in desks.values():
        table = desk.transfer
        for name, target in table.targets.items() if table is not None else ():
            if target.desk is not None and target.desk not in desks:
                where = desk.source or f"desk {desk.name!r}"
                known = ", ".join(sorted(desks))
                raise ConfigError(
                    f"{where}: transfer.targets.{name}.desk: no desk {target.desk!r} is "
                    f"served with this one (desks: {known})"
                )
