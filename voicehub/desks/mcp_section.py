"""The `[[mcp]]` tables of a desk file: MCP servers whose tools the desk's agents may use.

    [[mcp]]
    name = "helpdesk"                   # agents name its tools "helpdesk.<tool>" in `tools`
    command = ["python", "mcp/helpdesk_tools.py"]   # stdio: run from the desk file's folder
    env = { TICKETS_TOKEN = "HELPDESK_TOKEN" }      # the child's variable = ours, by name
    timeout = 10                        # seconds per tool call
    on_error = "Our ticket system is not answering right now."

    [[mcp]]
    name = "crm"
    url = "https://crm.example.com/mcp" # streamable HTTP
    headers = { Authorization = "CRM_AUTHORIZATION" }   # the value is read from $CRM_AUTHORIZATION

    [[agents]]
    id = "desk"
    tools = ["helpdesk.open_ticket", "crm.lookup_customer"]

Values of `env` and `headers` are the names of environment variables, never the secrets
themselves. Which tools an agent may call is its `tools` list; the model is offered each under
its own name (`open_ticket`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from voicehub.desks.sections import PositiveSeconds, Slug, StrictModel, field_error
from voicehub.mcp.names import ENV_NAME, HEADER_NAME
from voicehub.mcp.servers import HttpServer, McpServerSpec, StdioServer

__all__ = ["McpServerConfig"]


def _env_name(value: str) -> str:
    if not ENV_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an environment variable name: the file names the variable "
            "holding the value (such as CRM_AUTHORIZATION), never the value itself"
        )
    return value


def _header_name(value: str) -> str:
    if not HEADER_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not an HTTP header name")
    return value


EnvName = Annotated[str, AfterValidator(_env_name)]
HeaderName = Annotated[str, AfterValidator(_header_name)]


class McpServerConfig(StrictModel):
    """One `[[mcp]]` table: an MCP server (a stdio `command` or a streamable HTTP `url`)."""

    name: Slug
    """The server's name in this desk; agents list its tools as `"NAME.TOOL"` in `tools`."""
    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    """Stdio: the program and its arguments, run from the desk file's folder (`cwd`);
    `python` is the Python that runs voicehub."""
    url: str | None = Field(default=None, pattern=r"^https?://[^/?#\s]+(/\S*)?$")
    """Streamable HTTP: the server's MCP endpoint (often ending in `/mcp`)."""
    env: dict[EnvName, EnvName] = Field(default_factory=dict)
    """Stdio: variables the child gets, each read from the environment variable of that name
    here (`{ TOKEN = "HELPDESK_TOKEN" }`); it gets no others but HOME, PATH and the like."""
    headers: dict[HeaderName, EnvName] = Field(default_factory=dict)
    """HTTP: headers sent with every request, each value read from the environment variable
    named (`{ Authorization = "CRM_AUTHORIZATION" }`)."""
    cwd: str | None = None
    """Stdio: the folder the command runs in, relative to the desk file's; default: that
    folder."""
    timeout: PositiveSeconds = 10.0
    """Seconds a tool call may take; after that it is cancelled and answers with an error."""
    connect_timeout: PositiveSeconds = 10.0
    """Seconds to start or reach the server and list its tools."""
    on_error: str | None = None
    """What a failed call answers (server down, timed out, the tool's error): the model sees
    it, a scripted `reply = "{result}"` speaks it; unset: the error, naming the server."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise field_error("command", "give the server a `command` (stdio) or a `url` (HTTP)")
        if self.url is not None:
            for key in ("env", "cwd"):
                if getattr(self, key):
                    raise field_error(key, "only used with `command` (a stdio server)")
        if self.command is not None and self.headers:
            raise field_error("headers", "only used with `url` (an HTTP server)")
        return self

    def spec(self, desk: str, base: Path) -> McpServerSpec:
        """The server as `voicehub.mcp` runs it; relative paths resolve from `base` (the
        desk file's folder)."""
        transport: StdioServer | HttpServer
        if self.command is not None:
            transport = StdioServer(self.command, dict(self.env), base / (self.cwd or "."))
        else:
            assert self.url is not None
            transport = HttpServer(self.url, dict(self.headers))
        return McpServerSpec(
            self.name,
            desk,
            transport,
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
            on_error=self.on_error,
        )
