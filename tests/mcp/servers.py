"""The MCP tests' servers: the fake (voicehub_dev.fakes.mcp_server, on the official SDK)
over stdio, started by the toolset, or over HTTP, started here on a free 127.0.0.1 port.
Each test ends only the process it started, by its pid."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from voicehub.mcp.servers import HttpServer, McpServerSpec, StdioServer
from voicehub.mcp.toolset import McpToolset

FAKE = ("python", "-m", "voicehub_dev.fakes.mcp_server")
DESK = "helpdesk"
IO_WAIT = 60.0  # seconds of real time a server may take to start or answer on a busy machine


def stdio_spec(
    name: str = "fake",
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    on_error: str | None = None,
    command: tuple[str, ...] = FAKE,
) -> McpServerSpec:
    transport = StdioServer(command, dict(env or {}))
    return McpServerSpec(name, DESK, transport, timeout=timeout, on_error=on_error)


def http_spec(
    url: str,
    name: str = "crm",
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> McpServerSpec:
    return McpServerSpec(name, DESK, HttpServer(url, dict(headers or {})), timeout=timeout)


def toolset(spec: McpServerSpec, *tools: str) -> McpToolset:
    return McpToolset(DESK, [spec], [f"{spec.name}.{tool}" for tool in tools])


@dataclass
class HttpFake:
    process: subprocess.Popen[str]
    url: str

    def kill(self) -> None:
        """End this test's server (its pid only) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(IO_WAIT)


@contextlib.contextmanager
def http_fake(env: Mapping[str, str] | None = None) -> Iterator[HttpFake]:
    """The fake over streamable HTTP on a free port (it binds port 0 and says which)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "voicehub_dev.fakes.mcp_server", "--http"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    fake = HttpFake(process, "")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server listens (or exits)
        assert line.startswith("PORT "), f"the fake MCP server did not start: {line!r}"
        fake.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        yield fake
    finally:
        fake.kill()


def closed_port_url() -> str:
    """An HTTP URL on 127.0.0.1 where nothing listens (a port just freed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def read_pid(marker: Path) -> int:
    return int(marker.read_text())
