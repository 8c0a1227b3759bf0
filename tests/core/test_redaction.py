"""What `Redactor` scrubs and what it leaves: numbers in their usual spellings, keypad
entries by their keys, a desk's own patterns; ids, stamps, addresses and counts stay."""

from __future__ import annotations

import pytest

from voicehub.core.redaction import Redactor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call me on +15550100123", "call me on [number]"),
        ("call me on +1 (555) 010-0100 please", "call me on [number] please"),
        ("it's 555-010-0100.", "it's [number]."),
        ("from=+447700900123 to=+15550100", "from=[number] to=[number]"),
        ('{"digits": "4321#"}', '{"digits": "[digits]"}'),
        ("caller pressed: 1 2 3", "caller pressed: [digits]"),
        ("dtmf=9w9#", "dtmf=[digits]"),
    ],
)
def test_numbers_and_keypad_digits_are_scrubbed(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "room research:cli-67b3f2e8e4: recorded as 20261126T151203-1",
        "conversation tel-3f9a0c1d2e4b5a6978d0c1e2",
        "connection from 127.0.0.1:50432",
        "sent 4 keypad tones; 3 tasks; took 1234 ms",
        "delivery d-1 attempt 2",
    ],
)
def test_ids_stamps_addresses_and_counts_stay(text: str) -> None:
    assert Redactor().text(text) == text


def test_a_desks_patterns_and_span_attributes() -> None:
    redactor = Redactor(sensitive=[r"\bACC-\d{6}\b", r"(?i)secret word \w+"])
    said = "account ACC-123456, secret word Swordfish"
    assert redactor.text(said) == "account [redacted], [redacted]"
    assert redactor.attribute("voicehub.keypad.digits", "1234") == "[digits]"
    assert redactor.attribute("voicehub.tool.arguments", '{"to": "+15550100123"}') == (
        '{"to": "[number]"}'
    )
    assert redactor.attribute("voicehub.turn", 12345678) == 12345678
