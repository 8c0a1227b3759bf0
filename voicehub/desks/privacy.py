"""The desk file's `[privacy]` table: how long its conversations are kept, and what is
scrubbed from logs and traces.

    [privacy]
    keep_days = 90                 # delete a conversation 90 days after its last activity
    redact = true                  # phone numbers and keypad digits out of logs and spans
    sensitive = ['\\bACC-\\d{6}\\b']  # and whatever else matches these patterns

`keep_days` covers everything the store keeps of a conversation (its events, transcripts,
tasks, held results with the numbers sealed onto them, call records) and its recordings;
the server's retention sweeper deletes it once that many days passed since its last event,
delivery or call (0: kept until deleted by hand). `[record] keep_days` still prunes
recordings sooner on their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import Field, field_validator

from voicehub.core.redaction import Redactor
from voicehub.desks.sections import StrictModel

__all__ = ["PrivacyConfig", "process_redactor"]


class PrivacyConfig(StrictModel):
    """What the desk keeps of its callers, and for how long."""

    keep_days: float = Field(default=0.0, ge=0)
    """Days a conversation is kept after its last activity before everything of it is
    deleted (0: kept until deleted by hand, `voicehub conversations delete`)."""
    redact: bool = True
    """Scrub phone numbers and keypad digits from the server's logs and trace spans."""
    sensitive: tuple[str, ...] = ()
    """Regular expressions of more text to scrub from logs and spans (account numbers,
    say); each match is replaced by `[redacted]`."""

    @field_validator("sensitive")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return value


def process_redactor(configs: Iterable[PrivacyConfig]) -> Redactor | None:
    """The redactor of a process serving these desks' calls: logs and spans are the
    process's, not a desk's, so they are scrubbed unless every desk turns `redact` off, by
    every desk's `sensitive` patterns together (None: no redaction)."""
    chosen = list(configs)
    if chosen and not any(config.redact for config in chosen):
        return None
    return Redactor(pattern for config in chosen for pattern in config.sensitive)
