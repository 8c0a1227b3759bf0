"""A desk's MCP servers and the tools its agents name: discovery, checks, connections.

    toolset = McpToolset("helpdesk", servers, ["helpdesk.lookup_ticket"])
    tool = toolset.tools["helpdesk.lookup_ticket"]       # an McpTool, before any I/O
    problems = await toolset.open(clock)                 # connect, list, check each named tool
    await toolset.aclose()

`open` (the discovery) connects every server at once. A server that is down, or lacks a tool
the desk names, or lists one whose parameters are not a JSON Schema object, is a problem
naming the server and the desk; the other servers and the desk carry on, and a call to a tool
of a server that was down connects again first. `start` runs `open` in the background once
per event loop: the desk does so when a room first runs it.

The connections belong to the loop that opened them; used from another loop (a test's new
one), the toolset drops them and connects again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence

from voicehub.core.clock import Clock, SystemClock
from voicehub.mcp.connection import McpConnection, ServerTool
from voicehub.mcp.names import QualifiedTool, qualified_tool
from voicehub.mcp.servers import McpServerSpec, McpUnavailable
from voicehub.mcp.tool import McpTool

log = logging.getLogger("voicehub.mcp")

__all__ = ["McpToolset"]


class McpToolset:
    """The MCP side of one desk (see the module). `tools` holds an `McpTool` for every
    `"server.tool"` name in `names`, by that name."""

    def __init__(self, desk: str, servers: Sequence[McpServerSpec], names: Iterable[str]) -> None:
        self.desk = desk
        self.servers: dict[str, McpServerSpec] = {server.name: server for server in servers}
        self.tools: dict[str, McpTool] = {}
        for name in names:
            qualified = qualified_tool(name)
            if qualified is not None and name not in self.tools:
                server = self.servers[qualified.server]  # the desk file's checks ensure it
                self.tools[name] = McpTool(qualified, server, self)
        self.problems: list[str] = []
        self.clock: Clock = SystemClock()  # the one `start` or `open` was last given
        self._connections: dict[str, McpConnection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started: asyncio.Task[list[str]] | None = None

    def start(self, clock: Clock) -> None:
        """Discover in the background (once per loop); calls wait for their server."""
        self._for_this_loop()
        self.clock = clock
        if self._started is None:
            self._started = asyncio.create_task(self.open(clock), name=f"mcp-{self.desk}")

    async def open(self, clock: Clock) -> list[str]:
        """Connect every server, list its tools and check the named ones; the problems
        (also logged), none when all is well."""
        self._for_this_loop()
        self.clock = clock
        found = await asyncio.gather(*(self._open_server(name, clock) for name in self.servers))
        self.problems = [problem for problems in found for problem in problems]
        for problem in self.problems:
            log.warning("%s", problem)
        return self.problems

    async def _open_server(self, name: str, clock: Clock) -> list[str]:
        try:
            await self.connected(name, clock)
        except McpUnavailable as exc:
            return [f"{exc}; its tools answer with an error until it is back"]
        return self._check(name)

    async def connected(self, server: str, clock: Clock) -> McpConnection:
        """`server`'s open connection (connecting, and describing its tools, first if
        need be); raises McpUnavailable."""
        self._for_this_loop()
        connection = self._connections.get(server)
        if connection is None:
            connection = self._connections[server] = McpConnection(self.servers[server])
        if not connection.connected:
            listed = await connection.open(clock)
            for tool in self._tools_of(server):
                found = listed.get(tool.qualified.tool)
                if found is not None and _schema_problem(found) is None:
                    tool.describe(found)
        return connection

    def _check(self, server: str) -> list[str]:
        connection = self._connections[server]
        problems = []
        for tool in self._tools_of(server):
            found = connection.tools.get(tool.qualified.tool)
            if found is None:
                problems.append(self.missing_tool(tool.qualified))
            elif (problem := _schema_problem(found)) is not None:
                label = self.servers[server].label
                problems.append(f"{label}: tool {found.name!r}: {problem}")
        return problems

    def missing_tool(self, qualified: QualifiedTool) -> str:
        """Why `qualified` cannot be called: its server lists no such tool."""
        connection = self._connections.get(qualified.server)
        listed = ", ".join(sorted(connection.tools)) if connection is not None else ""
        label = self.servers[qualified.server].label
        return f"{label} has no tool {qualified.tool!r} (it lists: {listed or 'no tools'})"

    def _tools_of(self, server: str) -> list[McpTool]:
        return [tool for tool in self.tools.values() if tool.qualified.server == server]

    def _for_this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._connections, self._started = loop, {}, None

    async def aclose(self) -> None:
        """Close every connection (stdio servers are stopped)."""
        if self._loop is not asyncio.get_running_loop():
            return  # another loop's connections: nothing to close from here
        if self._started is not None and not self._started.done():
            self._started.cancel()
        for connection in self._connections.values():
            await connection.aclose()
        self._connections = {}
        self._started = None


def _schema_problem(tool: ServerTool) -> str | None:
    """Why `tool`'s input schema cannot be offered to a model, if it cannot."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    schema: Mapping[str, object] = tool.input_schema
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return 'its inputSchema is not a JSON Schema of "type": "object"'
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        return f"its inputSchema is not a valid JSON Schema: {exc.message}"
    return None
