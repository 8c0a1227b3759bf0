"""The `[phone]` table of a desk file: call-back and keypad settings, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.desks.loading import load_desk_file
from voicehub.errors import ConfigError

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def desk_with(tmp_path: Path, phone: str) -> Path:
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge" / "research.toml").write_text(
        (CHANNELS / "knowledge" / "research.toml").read_text()
    )
    path = tmp_path / "research.toml"
    path.write_text((CHANNELS / "research.toml").read_text() + "\n" + phone)
    return path


def test_callback_and_keys_are_read(tmp_path: Path) -> None:
    phone = """[phone]
callback = true
callback_attempts = 3
callback_delay = 5
[phone.keys]
"#" = { action = "repeat" }
"*" = { text = "how is it going?" }
"""
    config = load_desk_file(desk_with(tmp_path, phone)).phone
    assert (config.callback, config.callback_attempts, config.callback_delay) == (True, 3, 5.0)
    assert config.keys["#"].action == "repeat" and config.keys["*"].text == "how is it going?"


@pytest.mark.parametrize(
    ("phone", "why"),
    [
        ('[phone]\ncallback = true\nconversation = "call"', "needs conversation"),
        ("[phone]\ncallback_attempts = 0", "callback_attempts"),
        ('[phone.keys]\n"1" = { action = "repeat" }', "keys"),
        ('[phone.keys]\n"#" = { action = "repeat", text = "x" }', "exactly one"),
        ('[phone.keys]\n"#" = { action = "dance" }', "action"),
    ],
)
def test_bad_phone_settings_name_the_field(tmp_path: Path, phone: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        load_desk_file(desk_with(tmp_path, phone))
