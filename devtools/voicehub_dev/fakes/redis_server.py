"""A real `redis-server` for the tests: started on a free 127.0.0.1 port in a temp dir with AOF
on, stopped (by its own PID) at the end. Without Debian's redis-server the tests using it fail
with the command that installs it; they are never skipped.

    from voicehub_dev.fakes.redis_server import redis_server  # noqa: F401  (the fixture)
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL = "`make test` as root, or `apt-get update && apt-get install -y redis-server`"
_STARTUP_SECONDS = 10.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One redis-server process; `restart()` keeps its directory (and so its AOF)."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail(f"these tests need Debian's redis-server: run {INSTALL}", pytrace=False)
        self.binary = binary
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, *, appendonly: bool = True) -> None:
        self.process = subprocess.Popen(
            self.command(appendonly=appendonly),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()

    def command(self, *, appendonly: bool) -> list[str]:
        """The redis-server command line (a replica adds its primary to it)."""
        return [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.directory),
            "--appendonly", "yes" if appendonly else "no",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
        ]  # fmt: skip

    def _wait_until_ready(self) -> None:
        # Waiting for a child process to listen, not timing behaviour: poll its port.
        deadline = time.monotonic() + _STARTUP_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"redis-server exited with {self.process.returncode} at start")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        pytest.fail(f"redis-server did not answer on port {self.port} within {_STARTUP_SECONDS}s")

    def stop(self, *, kill: bool = False) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if kill:
            process.kill()
        else:
            process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # it refuses to stop (an AOF rewrite failed)
            process.kill()
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def running_redis(prefix: str = "voicehub-redis-") -> Iterator[RedisServer]:
    """A redis-server of its own in a temp dir, stopped on exit."""
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


def unique_prefix() -> str:
    """A key prefix of its own for each test, so tests sharing the server never collide."""
    return f"test-{uuid.uuid4().hex[:12]}"
