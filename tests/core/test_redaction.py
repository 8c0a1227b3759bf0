"""What `Redactor` scrubs and what it leaves: numbers in their usual spellings, keypad
entries by their keys, a desk's own patterns; ids, stamps, addresses and counts stay."""

from __future__ import annotations

import pytest

from voicehub.core.redaction import Redactor, without_credentials


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


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@db.internal:6379/0", "redis://:[redacted]@db.internal:6379/0"),
        ("rediss://app:s3:cr@t@db.internal/1", "rediss://app:[redacted]@db.internal/1"),
        (
            "redis://db.internal/0?password=s3cret&db=2",
            "redis://db.internal/0?password=[redacted]&db=2",
        ),
        ("unix:///run/redis.sock?password=s3cret", "unix:///run/redis.sock?password=[redacted]"),
    ],
)
def test_a_url_loses_its_password_but_says_where(url: str, shown: str) -> None:
    assert without_credentials(url) == shown


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6379/0", "rediss://app@db.internal/0", "var/voicehub.db", "x"]
)
def test_a_url_without_a_password_is_left_as_it_is(url: str) -> None:
    assert without_credentials(url) == url
