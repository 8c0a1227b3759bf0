"""`voicehub serve` processes for the multi-instance tests: real subprocesses on one Redis,
each on a free 127.0.0.1 port, stopped (or killed) by their own PID.

    a = ServeProcess("a", redis_url, channels, logs)
    await a.start()      # returns once it prints the URL it serves at
    a.kill()             # SIGKILL: no cleanup at all, as a crashed machine

Short heartbeat and lease settings keep a lost instance's work from waiting long; the tests
still wait on what they can observe (API records, call events), never on those times.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
CHANNELS = REPO / "channels"
FAKE_KEY_ENV = "VOICEHUB_TEST_FAKE_OPENAI_KEY"
FAKE_KEY = "sk-test-fake"

TIMINGS = {
    "VOICEHUB_HEARTBEAT_INTERVAL": "0.3",
    "VOICEHUB_INSTANCE_TIMEOUT": "3",
    "VOICEHUB_DELIVERY_LEASE": "3",
}


def write_channels(folder: Path, fake_openai_url: str | None = None) -> Path:
    """The research desk, and with a fake OpenAI server the `research-slow` (retry) and
    `research-strict` (fail) desks, whose analyst-b asks that model."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "knowledge").mkdir(exist_ok=True)
    knowledge = (CHANNELS / "knowledge" / "research.toml").read_text()
    (folder / "knowledge" / "research.toml").write_text(knowledge)
    research = (CHANNELS / "research.toml").read_text()
    (folder / "research.toml").write_text(research)
    if fake_openai_url is None:
        return folder
    scripted_b = research[research.index('[agents.scripted]\nfallback = "I had nothing') :]
    scripted_b = scripted_b[: scripted_b.index("# -- orchestration")]
    model = (
        f'llm = {{ provider = "openai", model = "gpt-test", base_url = "{fake_openai_url}", '
        f'api_key_env = "{FAKE_KEY_ENV}" }}\n\n'
    )
    for name, policy in (("research-slow", "retry"), ("research-strict", "fail")):
        text = research.replace('name = "research"', f'name = "{name}"', 1)
        text = text.replace(scripted_b, model)
        text = text.replace("[supervisor]\n", f'[supervisor]\non_instance_loss = "{policy}"\n')
        (folder / f"{name}.toml").write_text(text)
    return folder


class ServeProcess:
    """One `voicehub serve` instance named `name` (its instance id)."""

    def __init__(
        self,
        name: str,
        redis_url: str,
        channels: Path,
        logs: Path,
        *options: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.redis_url = redis_url
        self.channels = channels
        self.options = options  # more `voicehub serve` flags
        self.env = env or {}
        self.log_path = logs / f"serve-{name}.log"
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    async def start(self) -> None:
        """Start the process; returns once it serves (it prints its URL then)."""
        process = self._spawn()
        assert process.stdout is not None
        # Blocks until the server listens; off the event loop.
        line = await asyncio.to_thread(process.stdout.readline)
        found = re.match(r"voicehub: serving at (http://127\.0\.0\.1:\d+)/", line)
        assert found, f"instance {self.name} did not start: {line!r}\n{self.log()}"
        self.url = found.group(1)

    def _spawn(self) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "voicehub.cli", "serve", "--port", "0"]
        command += ["--channels", str(self.channels), "--store", self.redis_url]
        command += ["--log-level", "warning", *self.options]
        env = {
            **os.environ,
            **TIMINGS,
            **self.env,
            "HF_HUB_OFFLINE": "1",
            "VOICEHUB_TOKEN": "",
            "VOICEHUB_INSTANCE_ID": self.name,
            FAKE_KEY_ENV: FAKE_KEY,
        }
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True
            )
        return self.process

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the instance stops mid-whatever, nothing cleaned up."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def drain(self) -> None:
        """SIGTERM: the instance drains (hands its calls over) and exits on its own."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    async def exited(self, timeout: float = 120.0) -> int:
        """Wait (off the event loop) until the process has exited; its exit code."""
        assert self.process is not None
        return await asyncio.to_thread(self.process.wait, timeout)

    def stop(self) -> None:
        """Ctrl-C (the ordinary shutdown), SIGKILL if it will not stop."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()

    async def get(self, path: str, **params: str) -> Any:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as client:
            response = await client.get(path, params=params)
            response.raise_for_status()
            return response.json()
