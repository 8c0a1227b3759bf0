"""The `[phone]` table of a desk file: how phone calls (Twilio) reach the desk.

[phone]
conversation = "caller"   # or "call": a fresh conversation for every call
callback = false          # call the caller back when a result is held after a hang-up
callback_attempts = 2     # calls placed at most per held result
callback_delay = 60.0     # seconds before each of them
voicemail = "Hello, this is {desk} calling back. Your results on {topics} are ready: ..."
                          # left once on an answering machine a call-back reaches ("" hangs up)
digit_gap = 1.0           # keypad digits pressed within this many seconds are one answer

[phone.keys]              # what `#` and `*` do on the keypad
"#" = { action = "repeat" }          # speak the last result again
"*" = { text = "how is it going?" }  # as if the caller had said it
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from voicehub.desks.sections import StrictModel

__all__ = ["DEFAULT_VOICEMAIL", "KeyBinding", "PhoneConfig"]

DEFAULT_VOICEMAIL = (
    "Hello, this is {desk} calling back. Your results on {topics} are ready: "
    "call us back to hear them."
)
_VOICEMAIL_NAMES = frozenset({"desk", "topics"})


class KeyBinding(StrictModel):
    """What one keypad key does: a built-in `action`, or `text` taken as the caller's words."""

    action: Literal["repeat"] | None = None
    """A built-in action: `repeat` speaks the last result again."""
    text: str | None = Field(default=None, min_length=1, max_length=500)
    """Words taken as if the caller had said them."""

    @model_validator(mode="after")
    def _one_of(self) -> KeyBinding:
        if (self.action is None) == (self.text is None):
            raise ValueError('give exactly one of `action = "repeat"` or `text = "..."`')
        return self


class PhoneConfig(StrictModel):
    """`conversation = "caller"` keys a call's conversation to the caller's number (hashed),
    so calling back hears the results held meanwhile; `"call"` starts afresh every call
    (for desks shared by many people behind one number, such as a switchboard).

    `callback = true` (needs `conversation = "caller"`) calls the caller back when a result
    is held because they hung up: up to `callback_attempts` calls, `callback_delay` seconds
    apart (and before the first, so a caller who rings back themselves is not called too).
    A call-back that reaches an answering machine waits for the beep and leaves `voicemail`
    once (`{desk}`: the desk's title, `{topics}`: what the held results are about); the
    results stay held and that call-back is not tried again. `voicemail = ""` hangs up.
    """

    conversation: Literal["caller", "call"] = "caller"
    """`caller`: a call's conversation is the caller's number (hashed), so calling back hears held
    results; `call`: a fresh conversation every call."""
    callback: bool = False
    """Call the caller back when a result is held because they hung up (needs `conversation =
    "caller"` and `TWILIO_ACCOUNT_SID`)."""
    callback_attempts: int = Field(default=2, ge=1, le=10)
    """Calls placed at most per held result (1-10)."""
    callback_delay: float = Field(default=60.0, ge=0.0, le=86_400.0)
    """Seconds before each call-back (a caller who rings back first is not called)."""
    digit_gap: float = Field(default=1.0, gt=0.0, le=10.0)
    """Keypad digits pressed within this many seconds are one answer."""
    keys: dict[Literal["#", "*"], KeyBinding] = Field(default_factory=dict)
    """What `#` and `*` do on the keypad: `[phone.keys]`."""
    voicemail: str = Field(default=DEFAULT_VOICEMAIL, max_length=500)
    """Left once on an answering machine a call-back reaches (`{desk}`: the desk's title,
    `{topics}`: what the held results are about); "" hangs up instead."""

    @field_validator("voicemail")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        for name in re.findall(r"\{([^{}]*)\}", value):
            if name not in _VOICEMAIL_NAMES:
                raise ValueError(f"unknown placeholder {{{name}}}; usable: {{desk}}, {{topics}}")
        return value

    @model_validator(mode="after")
    def _callback_needs_caller(self) -> PhoneConfig:
        if self.callback and self.conversation != "caller":
            raise ValueError(
                'callback = true needs conversation = "caller" (a call-back reaches the '
                "conversation of the number it calls)"
            )
        return self
