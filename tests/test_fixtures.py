"""The committed speech fixtures are what their manifest says: every file there, mono
16-bit at its rate, with its PCM's sha256, and no file the manifest does not list (a test
reading speech reads the same bytes on every machine: tests/support/speech.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import soundfile

from tests.support import speech
from tests.support.speech import DATA, FixtureError, manifest, read_pcm16, spoken

MAX_BYTES = 3_000_000  # the fixtures stay small: every clone carries them


def test_every_fixture_matches_its_manifest_hash() -> None:
    fixtures = list(manifest().values())
    assert fixtures
    for fixture in fixtures:
        assert read_pcm16(fixture), fixture.file


def test_the_manifest_lists_every_file_and_they_stay_small() -> None:
    files = {str(path.relative_to(DATA)) for path in (DATA / "speech").glob("*")}
    assert files == {fixture.file for fixture in manifest().values()}
    assert sum((DATA / name).stat().st_size for name in files) < MAX_BYTES


def test_an_unknown_text_is_refused_naming_the_fix() -> None:
    with pytest.raises(FixtureError, match=r"add it to FIXTURES in tests/data/make_fixtures\.py"):
        spoken("words nobody recorded")


def test_a_changed_file_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixture = next(iter(manifest().values()))
    changed = tmp_path / fixture.file
    changed.parent.mkdir(parents=True)
    shutil.copy(DATA / fixture.file, changed)
    samples, rate = soundfile.read(changed, dtype="int16")
    samples[len(samples) // 2] ^= 1  # one least significant bit
    soundfile.write(changed, samples, rate, format="FLAC", subtype="PCM_16")
    monkeypatch.setattr(speech, "DATA", tmp_path)
    named = f"{re.escape(str(changed))}: its PCM's sha256 is .* the manifest says"
    with pytest.raises(FixtureError, match=named):
        read_pcm16(fixture)
