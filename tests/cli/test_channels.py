"""`voicehub channels` as a user types it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from voicehub.cli import main

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def test_channels_lists_and_checks_the_example_desks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["channels", "--channels", str(CHANNELS)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ok +research +Research desk", out, re.M)
    assert "call:     /desks/research/call?conversation=<id>" in out
    assert "workers:  analyst-a, analyst-b (parallel, delegate_workers)" in out
    assert "loop:     writer reviewed by editor, fact-checker (at most 3 rounds" in out
    assert (
        "manager:  desk delegates (background) to agents analyst-a, analyst-b, note-writer; "
        "workflows market-brief, support-escalation" in out
    )
    assert "board:    coordinator coordinates researcher, outliner, writer (start_report" in out
    assert "with errors" in out and ", 0 with errors" in out


def test_channels_names_each_broken_file_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(CHANNELS / "knowledge", tmp_path / "knowledge")
    shutil.copy(CHANNELS / "research.toml", tmp_path / "research.toml")
    shutil.copy(CHANNELS / "research.toml", tmp_path / "research-copy.toml")
    (tmp_path / "typo.toml").write_text('name = "typo"\ngreting = "hi"\n[[agents]]\nid = "desk"\n')
    assert main(["channels", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^ok +research", out, re.M)
    assert "research.toml: desk name 'research' is used by" in out  # files go in name order
    assert f"ERROR {tmp_path / 'typo.toml'}" in out
    assert "greting: unknown field 'greting' (did you mean 'greeting'?)" in out
    assert "1 desk(s) ok, 2 with errors" in out


def test_a_missing_folder_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["channels", "--channels", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err == f"voicehub channels: {tmp_path / 'nope'}: no such desk folder\n"
    )


def test_the_old_flag_name_still_works_and_says_it_is_deprecated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["channels", "--dir", str(CHANNELS)]) == 0
    captured = capsys.readouterr()
    assert "--dir is deprecated; use --channels" in captured.err
    assert re.search(r"^ok +research", captured.out, re.M)
