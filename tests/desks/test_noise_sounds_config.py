"""A desk's `[voice] denoise` and `[voice.sounds]` settings: defaults, values, and mistakes
named with their key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.desks.test_loading import VALID, error_of, write_desk
from voicehub.desks.loading import load_desk_file


def with_voice(table: str) -> str:
    return VALID.replace('title = "Mini desk"', f'title = "Mini desk"\n\n[voice]\n{table}\n')


def test_nothing_is_added_unless_the_desk_asks(tmp_path: Path) -> None:
    voice = load_desk_file(write_desk(tmp_path, VALID)).voice
    assert voice.denoise is None  # the line's default
    sounds = voice.sounds
    assert (sounds.thinking, sounds.hold, sounds.filler) == ("off", "off", ())


def test_a_desk_chooses_denoise_and_its_sounds(tmp_path: Path) -> None:
    text = with_voice(
        'denoise = "rnnoise"\n\n[voice.sounds]\nthinking = "keys"\nthinking_after = 0.6\n'
        'hold = "hold-music"\nfiller = ["One moment.", "Let me check."]\nvolume_db = -18\n'
    )
    voice = load_desk_file(write_desk(tmp_path, text)).voice
    assert voice.denoise == "rnnoise"
    assert voice.sounds.thinking == "keys" and voice.sounds.thinking_after == 0.6
    assert voice.sounds.hold == "hold-music"
    assert voice.sounds.filler == ("One moment.", "Let me check.")
    assert voice.sounds.volume_db == -18


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('denoise = "speex"', "voice.denoise"),
        ('[voice.sounds]\nthinking = "beep"', "voice.sounds.thinking"),
        ("[voice.sounds]\nthinking_after = 0", "voice.sounds.thinking_after"),
        ('[voice.sounds]\nfiller = [""]', "voice.sounds.filler"),
        ("[voice.sounds]\nvolume_db = 6", "voice.sounds.volume_db"),
        ('[voice.sounds]\nthinkng = "keys"', "did you mean 'thinking'"),
        ('engine = "openai-realtime"\ndenoise = "rnnoise"', "only used with engine = 'pipeline'"),
        (
            'engine = "openai-realtime"\n\n[voice.sounds]\nthinking = "keys"',
            "only used with engine = 'pipeline'",
        ),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, table: str, expected: str) -> None:
    assert expected in error_of(tmp_path, with_voice(table))
