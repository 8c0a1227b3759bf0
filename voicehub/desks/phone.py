"""The `[phone]` table of a desk file: how phone calls (Twilio) reach the desk.

[phone]
conversation = "caller"   # or "call": a fresh conversation for every call
callback = false          # call the caller back when a result is held after a hang-up
callback_attempts = 2     # calls placed at most per held result
callback_delay = 60.0     # seconds before each of them
digit_gap = 1.0           # keypad digits pressed within this many seconds are one answer

[phone.keys]              # what `#` and `*` do on the keypad
"#" = { action = "repeat" }          # speak the last result again
"*" = { text = "how is it going?" }  # as if the caller had said it
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from voicehub.desks.sections import StrictModel

__all__ = ["KeyBinding", "PhoneConfig"]


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

    @model_validator(mode="after")
    def _callback_needs_caller(self) -> PhoneConfig:
        if self.callback and self.conversation != "caller":
            raise ValueError(
                'callback = true needs conversation = "caller" (a call-back reaches the '
                "conversation of the number it calls)"
            )
        return self
