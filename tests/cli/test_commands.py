"""`voicehub serve | call | channels` as a user types them (the call itself is exercised end
to end in test_e2e.py)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from voicehub.cli.commands import add_commands, main, run_command
from voicehub.voice.audio import write_wav

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
REPO = CHANNELS.parent


def test_channels_lists_and_checks_the_example_desks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["channels", "--dir", str(CHANNELS)]) == 0
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


def test_user_errors_are_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_TOKEN", raising=False)
    assert main(["channels", "--dir", str(tmp_path / "nope")]) == 2
    assert "no such desk folder" in capsys.readouterr().err

    assert main(["serve", "--host", "0.0.0.0", "--channels", str(CHANNELS)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("voicehub serve: refusing to listen on 0.0.0.0")

    assert main(["call", "research"]) == 2
    assert "add --say 'your words' or --wav" in capsys.readouterr().err
    assert main(["call", "research", "--wav", str(tmp_path / "missing.wav")]) == 2
    assert "cannot use it as the caller's audio" in capsys.readouterr().err

    recording = tmp_path / "hello.wav"
    write_wav(recording, bytes(8000 * 2), 8000)
    assert main(["call", "research", "--server", "http://127.0.0.1:9", "--wav", str(recording)])
    err = capsys.readouterr().err
    assert "cannot reach http://127.0.0.1:9" in err and "voicehub serve" in err


def test_the_commands_plug_into_another_parser() -> None:
    parser = argparse.ArgumentParser(prog="voicehub")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("bench")
    add_commands(commands)
    assert run_command(parser.parse_args(["bench"])) is None
    args = parser.parse_args(["call", "drafting", "--say", "hi", "--wav", "a.wav", "--say", "bye"])
    assert args.lines == [("say", "hi"), ("wav", "a.wav"), ("say", "bye")]
    assert parser.parse_args(["serve", "--port", "0"]).port == 0


def test_serve_prints_its_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "voicehub.cli.commands", "serve", "--port", "0"]
    command += ["--db", str(tmp_path / "v.db"), "--no-prewarm", "--log-level", "warning"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": ""}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server listens
        found = re.match(r"voicehub: serving at (http://127\.0\.0\.1:\d+/)", line)
        assert found, line + (process.stderr.read() if process.stderr else "")
        assert "voicehub call research --say" in process.stdout.readline()
        health = httpx.get(found.group(1) + "health", timeout=10).json()
        assert health["status"] == "ok" and "research" in health["desks"]
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "undelivered results stay in the store" in out
