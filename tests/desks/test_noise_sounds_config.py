"""A desk's `[voice] denoise` setting: default, values, and mistakes named with their key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.desks.test_loading import VALID, error_of, write_desk
from voicehub.desks.loading import load_desk_file


def with_voice(table: str) -> str:
    return VALID.replace('title = "Mini desk"', f'title = "Mini desk"\n\n[voice]\n{table}\n')


def test_denoise_is_the_lines_default_unless_the_desk_chooses(tmp_path: Path) -> None:
    assert load_desk_file(write_desk(tmp_path, VALID)).voice.denoise is None
    voice = load_desk_file(write_desk(tmp_path, with_voice('denoise = "rnnoise"'))).voice
    assert voice.denoise == "rnnoise"


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('denoise = "speex"', "voice.denoise"),
        ('engine = "openai-realtime"\ndenoise = "rnnoise"', "only used with engine = 'pipeline'"),
    ],
)
def test_bad_settings_are_named(tmp_path: Path, table: str, expected: str) -> None:
    assert expected in error_of(tmp_path, with_voice(table))
