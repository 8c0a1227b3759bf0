"""The `[phone]` table of a desk file: how phone calls (Twilio) reach the desk.

[phone]
conversation = "caller"   # or "call": a fresh conversation for every call
callback = false          # call the caller back when a result is held (not built yet)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from voicehub.desks.sections import StrictModel

__all__ = ["PhoneConfig"]


class PhoneConfig(StrictModel):
    """`conversation = "caller"` keys a call's conversation to the caller's number (hashed),
    so calling back hears the results held meanwhile; `"call"` starts afresh every call
    (for desks shared by many people behind one number, such as a switchboard)."""

    conversation: Literal["caller", "call"] = "caller"
    callback: bool = False
    callback_attempts: int = Field(default=2, ge=1, le=10)
    callback_delay: float = Field(default=60.0, ge=0.0, le=86_400.0)

    @field_validator("callback")
    @classmethod
    def _callback_not_built(cls, value: bool) -> bool:
        if value:
            raise ValueError("calling the caller back is not available yet; leave it false")
        return value
