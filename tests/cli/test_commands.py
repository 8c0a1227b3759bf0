"""The `voicehub` command's commands: built in, or added by another distribution (the
development tools add `bench` and `soak`)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from voicehub import cli


def _entry_points(*entries: EntryPoint) -> Any:
    return lambda group: [e for e in entries if e.group == group]


def test_the_development_tools_add_bench_and_soak() -> None:
    commands = cli._commands()
    assert {"bench", "soak"} <= commands.keys()
    assert commands["bench"].__name__ == "voicehub_dev.commands.bench"


def test_bench_without_the_development_tools_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "entry_points", _entry_points())
    assert cli.main(["bench", "--only", "voice"]) == 2
    error = capsys.readouterr().err
    assert "voicehub bench: a development command" in error
    assert "pip install -e devtools" in error


def test_a_command_that_fails_to_load_is_skipped_with_a_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = EntryPoint("broken", "voicehub_dev.no_such_module", "voicehub.commands")
    monkeypatch.setattr(cli, "entry_points", _entry_points(broken))
    commands = cli._commands()
    assert "broken" not in commands
    assert "channels" in commands
    assert "skipped the command 'broken'" in capsys.readouterr().err
