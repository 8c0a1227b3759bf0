"""`voicehub serve` as a user types it, and `python -m voicehub.cli`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from voicehub.cli import main
from voicehub.cli.serve import try_command

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
REPO = CHANNELS.parent


def test_an_open_address_without_a_token_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--channels", str(CHANNELS)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("voicehub serve: refusing to listen on 0.0.0.0")


@pytest.mark.slow
def test_serve_prints_its_url_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "voicehub.cli", "serve", "--port", "0"]
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
        hint = process.stdout.readline()  # the command as this shell finds it
        name = f"{Path(sys.executable).name} -m voicehub.cli"
        assert f"{name} call research --server {found.group(1)} --say" in hint, hint
        health = httpx.get(found.group(1) + "health", timeout=10).json()
        assert health["status"] == "ok" and "research" in health["desks"]
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "undelivered results stay in the store" in out


def test_the_try_hint_calls_a_desk_served_at_the_address_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VOICEHUB_URL", raising=False)
    hint = try_command("http://127.0.0.1:8091/", ["triage", "hello"])
    assert hint.endswith("call hello --server http://127.0.0.1:8091/ --say hello"), hint
    default = try_command("http://127.0.0.1:8080/", ["hello", "research"])
    assert default.endswith("call research --say 'could you research heat pumps for me please'")
    monkeypatch.setenv("VOICEHUB_URL", "http://127.0.0.1:8091")
    assert "--server" not in try_command("http://127.0.0.1:8091/", ["hello"])


@pytest.mark.slow
def test_serve_names_its_broken_desk_files_and_hints_at_a_desk_it_serves(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "desks"
    folder.mkdir()
    (folder / "hello.toml").write_text('name = "hello"\n\n[[agents]]\nid = "desk"\n')
    (folder / "typo.toml").write_text('name = "typo"\n\n[[agents]]\nid = "desk"\nsay = 1\n')
    command = [sys.executable, "-m", "voicehub.cli", "serve", "--port", "0"]
    command += ["--channels", str(folder), "--db", str(tmp_path / "v.db"), "--no-prewarm"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": "", "VOICEHUB_URL": ""}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        served = process.stdout.readline()
        url = re.match(r"voicehub: serving at (http://127\.0\.0\.1:\d+/)", served)
        assert url, served + (process.stderr.read() if process.stderr else "")
        broken = process.stdout.readline()
        hint = process.stdout.readline()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert "1 desk file(s) not served" in broken and str(folder / "typo.toml") in broken, broken
    assert f"call hello --server {url.group(1)} --say hello" in hint, hint
    assert f"desk file not served: {folder / 'typo.toml'}:5: agents[0].say" in err, err


@pytest.mark.slow
def test_a_normal_reload_is_one_info_line(tmp_path: Path) -> None:
    # a saved desk file is news, not a problem: shown at INFO (still shown with --reload)
    folder = tmp_path / "desks"
    folder.mkdir()
    hello = folder / "hello.toml"
    hello.write_text('name = "hello"\ntitle = "Hello"\n\n[[agents]]\nid = "desk"\n')
    command = [sys.executable, "-m", "voicehub.cli", "serve", "--port", "0", "--reload"]
    command += ["--channels", str(folder), "--db", str(tmp_path / "v.db"), "--no-prewarm"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": "", "VOICEHUB_URL": ""}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        served = process.stdout.readline()
        assert served.startswith("voicehub: serving at"), served + process.stderr.read()
        hello.write_text(hello.read_text().replace('"Hello"', '"Hello again"'))
        line = ""
        while "desk hello reloaded" not in line:
            line = process.stderr.readline()
            assert line, "the server stopped before reporting the reload"
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert line.startswith("INFO voicehub.reload: desk hello reloaded"), line
