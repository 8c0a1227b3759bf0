"""The server under soak: `voicehub serve` started as a subprocess on a free port (or a
server already running at a URL), and a sampler of its RSS and event-loop lag over time.

The callers run in the soak process, the server in its own: their CPU and memory do not
mix into the server's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from asyncio.subprocess import PIPE, Process
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from voicehub.errors import VoicehubError

__all__ = ["HealthSample", "HealthSampler", "ServerProcess", "process_cpu_seconds"]

_READY = re.compile(r"serving at (\S+)")


class ServerProcess:
    """`voicehub serve --port 0` in a subprocess; `url` once it listens."""

    def __init__(
        self,
        folder: Path,
        channels: Path | None = None,
        environment: dict[str, str] | None = None,
        options: list[str] | None = None,
    ) -> None:
        self.folder = folder
        self.channels = channels
        self.environment = dict(environment or {})
        self.options = list(options or [])  # more `voicehub serve` flags
        self.url = ""
        self._process: Process | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self, timeout: float = 120.0) -> str:
        command = ["-m", "voicehub.cli", "serve", "--port", "0"]
        command += ["--db", str(self.folder / "soak.db"), "--log-level", "warning"]
        if self.channels is not None:
            command += ["--channels", str(self.channels)]
        command += self.options
        environment = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            **self.environment,
        }
        with (self.folder / "server.log").open("w") as log_file:
            self._process = process = await asyncio.create_subprocess_exec(
                sys.executable, *command, stdout=PIPE, stderr=log_file, env=environment
            )
        assert process.stdout is not None
        url = await asyncio.wait_for(_ready_url(process.stdout), timeout)
        if url is None:
            raise VoicehubError(
                f"voicehub serve exited ({await process.wait()}) before listening; "
                f"see {self.folder / 'server.log'}"
            )
        self.url = url
        return url

    def rss_mb(self) -> float | None:
        """The server's resident memory now (None once it has exited)."""
        if self._process is None:
            return None
        with contextlib.suppress(OSError):
            pages = int(Path(f"/proc/{self._process.pid}/statm").read_text().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
        return None

    def cpu_seconds(self) -> float | None:
        """The server's CPU so far, all threads, user and system (None once it has exited)."""
        return process_cpu_seconds(self._process.pid) if self._process is not None else None

    async def stop(self, timeout: float = 30.0) -> int | None:
        """Interrupt the server (it holds undelivered results) and wait for it."""
        process = self._process
        if process is None:
            return None
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(process.wait(), timeout)
            except TimeoutError:
                process.kill()
                await process.wait()
        return process.returncode


async def _ready_url(stdout: asyncio.StreamReader) -> str | None:
    """The URL `voicehub serve` prints once it listens (None if it exits first)."""
    while line := await stdout.readline():
        found = _READY.search(line.decode(errors="replace"))
        if found:
            return found.group(1).rstrip("/")
    return None


def process_cpu_seconds(pid: int) -> float | None:
    """CPU process `pid` has used (user + system, all threads), from /proc; None when it is
    gone or this is not Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class HealthSample:
    """One sample: seconds into the run, the server's RSS (MB), worst loop lag since the
    previous sample (ms, None when the server does not report it), live calls, and the CPU
    the server used since the previous sample (cores; None without a previous one or when
    the server is not ours)."""

    at: float
    rss_mb: float | None
    loop_lag_ms: float | None
    calls: int
    cpu_cores: float | None = None


@dataclass
class HealthSampler:
    """Polls `/health` every `every` seconds; RSS from /proc when the server is ours."""

    url: str
    every: float
    process: ServerProcess | None = None
    token: str | None = None
    samples: list[HealthSample] = field(default_factory=list)
    # (seconds into the run, server CPU seconds) at the last sample that read them
    _cpu_at: tuple[float, float] | None = field(default=None, init=False, repr=False)

    async def run(self) -> None:
        started = time.monotonic()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        async with httpx.AsyncClient(base_url=self.url, timeout=10, headers=headers) as http:
            while True:
                await self.sample(http, time.monotonic() - started)
                await asyncio.sleep(self.every)

    async def sample(self, http: httpx.AsyncClient, at: float) -> None:
        try:
            body = (await http.get("/health")).json()
        except (httpx.HTTPError, ValueError):
            return  # a stalled or restarting server misses a sample; the gap shows
        rss = self.process.rss_mb() if self.process is not None else body.get("rss_mb")
        cores = None
        cpu = self.process.cpu_seconds() if self.process is not None else None
        if cpu is not None:
            if self._cpu_at is not None and at > self._cpu_at[0]:
                cores = round((cpu - self._cpu_at[1]) / (at - self._cpu_at[0]), 2)
            self._cpu_at = (at, cpu)
        self.samples.append(
            HealthSample(
                round(at, 1), rss, body.get("loop_lag_ms"), int(body.get("calls", 0)), cores
            )
        )
