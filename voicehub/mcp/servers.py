"""One MCP server as a desk uses it: how to reach it, and how long a call may take.

Secrets never sit in a desk file: `StdioServer.env` and `HttpServer.headers` map what the
server gets (a child's environment variable, an HTTP header) to the name of an environment
variable of voicehub's own process, read when the server is connected. An unset variable is
that server's error (naming the variable), not the desk's: its other servers still connect.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class McpUnavailable(Exception):
    """A server could not be reached, or stopped answering; the message names it."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server voicehub starts as a child process and speaks to over stdin/stdout.
    `command[0]` is looked up on PATH; `python` is the Python that runs voicehub."""

    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def program(self) -> tuple[str, list[str]]:
        """The program to run and its arguments."""
        first, *rest = self.command
        return (sys.executable if first == "python" else first), rest

    def describe(self) -> str:
        return " ".join(self.command)


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server at a streamable HTTP URL (the MCP endpoint, often `.../mcp`)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return self.url


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """A desk's `[[mcp]]` server: `timeout` bounds each tool call, `connect_timeout` the
    start, handshake and tool listing; `on_error` is what a failed call answers (the model
    sees it; a scripted `reply = "{result}"` speaks it), else the error itself."""

    name: str
    desk: str
    transport: StdioServer | HttpServer
    timeout: float = 10.0
    connect_timeout: float = 10.0
    on_error: str | None = None

    @property
    def label(self) -> str:
        """How messages name it: `MCP server 'crm' of desk 'helpdesk'`."""
        return f"MCP server {self.name!r} of desk {self.desk!r}"


def read_secrets(
    names: Mapping[str, str], what: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`{key: value of the environment variable names[key]}`; raises McpUnavailable naming
    the first unset variable (`what` says whose: "header 'Authorization'")."""
    source = os.environ if environ is None else environ
    values: dict[str, str] = {}
    for key, variable in names.items():
        value = source.get(variable)
        if not value:
            raise McpUnavailable(f"{what} {key!r}: environment variable {variable} is unset")
        values[key] = value
    return values
