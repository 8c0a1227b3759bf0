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

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
REPO = CHANNELS.parent


def test_an_open_address_without_a_token_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--channels", str(CHANNELS)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("voicehub serve: refusing to listen on 0.0.0.0")


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
        assert f"{Path(sys.executable).name} -m voicehub.cli call research --say" in hint, hint
        health = httpx.get(found.group(1) + "health", timeout=10).json()
        assert health["status"] == "ok" and "research" in health["desks"]
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "undelivered results stay in the store" in out
