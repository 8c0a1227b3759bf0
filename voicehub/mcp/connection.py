"""One open connection to an MCP server, on the official SDK's `ClientSession`.

The SDK's transports and session are anyio context managers that must be entered and left
by one task, so a holder task owns them: it connects, lists the tools, hands the session
over and waits to be told to close. Calls run from any task of the same loop.

A connection that fails (the server exits, its HTTP endpoint goes away) is closed and the
next call connects again; the failed call is not retried, since a tool may have acted before
its server died. Time limits (connecting, each call) run on the runtime's clock; the SDK's
own read timeout is off, so an injected clock decides alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from voicehub.core.clock import Clock, SystemClock
from voicehub.mcp.servers import HttpServer, McpServerSpec, McpUnavailable, read_secrets

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult

log = logging.getLogger("voicehub.mcp")

__all__ = ["McpCallFailed", "McpConnection", "ServerTool"]


class McpCallFailed(Exception):
    """The server answered a call with a protocol error (unknown tool, bad parameters)."""


@dataclass(frozen=True, slots=True)
class ServerTool:
    """A tool as the server lists it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


class McpConnection:
    """The connection to `spec`'s server (see the module). `open` connects (again, after a
    failure) and lists the tools; `call` runs one; `aclose` ends it."""

    def __init__(self, spec: McpServerSpec) -> None:
        self.spec = spec
        self.tools: dict[str, ServerTool] = {}
        self._session: ClientSession | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self._opening: asyncio.Future[None] | None = None
        self._refused: int | None = None  # the last HTTP error status the server answered

    @property
    def connected(self) -> bool:
        return self._session is not None

    @property
    def session(self) -> ClientSession | None:
        """The SDK's session while connected (the bench times calls on it bare)."""
        return self._session

    async def open(self, clock: Clock) -> dict[str, ServerTool]:
        """Connect unless connected, within `connect_timeout` on `clock`; the server's tools
        by name. Raises McpUnavailable naming the server and why."""
        if self._session is not None:
            return self.tools
        if self._opening is None or self._opening.done():
            self._opening = asyncio.ensure_future(self._connect(clock))
        await asyncio.shield(self._opening)
        return self.tools

    async def _connect(self, clock: Clock) -> None:
        await self._stop_holder()
        # The SDK takes about 1.5 s of CPU to import: on a thread, so the loop (other calls'
        # audio) keeps running meanwhile; a no-op once imported.
        await asyncio.to_thread(_import_sdk)
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        holder = asyncio.create_task(self._hold(ready), name=f"mcp-{self.spec.name}")
        self._holder = holder
        deadline = asyncio.ensure_future(clock.sleep(self.spec.connect_timeout))
        first: set[asyncio.Future[Any]] = {ready, deadline}
        try:
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deadline.cancel()
        if not ready.done():
            await self._stop_holder()
            raise McpUnavailable(
                f"{self.spec.label} did not start within {self.spec.connect_timeout:g} s "
                f"({self.spec.transport.describe()})"
            )
        self._session = ready.result()  # raises McpUnavailable when connecting failed

    async def _hold(self, ready: asyncio.Future[ClientSession]) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.tools = await _list_tools(session)
                ready.set_result(session)
                await self._closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # the transport's task groups raise groups
            reason = _reason(exc)
            if self._refused is not None:  # the SDK's error does not say the status
                reason = f"HTTP {self._refused} from {self.spec.transport.describe()} ({reason})"
            if ready.done():
                log.warning("%s: connection lost: %s", self.spec.label, reason)
            else:
                ready.set_exception(McpUnavailable(f"{self.spec.label} is unavailable: {reason}"))
        finally:
            self._session = None

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        transport = self.spec.transport
        if isinstance(transport, HttpServer):
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = read_secrets(transport.headers, "header")
            timeout = httpx2.Timeout(self.spec.connect_timeout, read=None)
            self._refused = None

            async def note(response: httpx2.Response) -> None:
                if response.status_code >= 400:
                    self._refused = response.status_code

            hooks = {"response": [note]}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as client,
                streamable_http_client(transport.url, http_client=client) as streams,
            ):
                yield streams
            return
        from mcp import StdioServerParameters, stdio_client

        program, arguments = transport.program()
        parameters = StdioServerParameters(
            command=program,
            args=arguments,
            env=read_secrets(transport.env, "variable"),
            cwd=transport.cwd,
        )
        async with stdio_client(parameters, errlog=sys.stderr) as streams:
            yield streams

    async def call(self, clock: Clock, name: str, arguments: Mapping[str, Any]) -> CallToolResult:
        """Run tool `name`; raises McpUnavailable (the server is down or went away: the
        connection is closed, the next call connects again), McpCallFailed (a protocol
        error), TimeoutError (after `timeout` on `clock`; the call is cancelled)."""
        session = self._session
        if session is None:
            await self.open(clock)
            session = self._session
            assert session is not None
        if isinstance(clock, SystemClock):  # the loop's own timer: no task per call
            try:
                async with asyncio.timeout(self.spec.timeout):
                    return await self._answer(session, name, arguments)
            except TimeoutError:
                raise TimeoutError(f"no answer within {self.spec.timeout:g} s") from None
        running = asyncio.ensure_future(self._answer(session, name, arguments))
        deadline = asyncio.ensure_future(clock.sleep(self.spec.timeout))
        either: set[asyncio.Future[Any]] = {running, deadline}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            deadline.cancel()
            if not running.done():
                running.cancel()  # the SDK tells the server (notifications/cancelled)
                await asyncio.wait({running})
        if running.cancelled():
            raise TimeoutError(f"no answer within {self.spec.timeout:g} s")
        return running.result()

    async def _answer(
        self, session: ClientSession, name: str, arguments: Mapping[str, Any]
    ) -> CallToolResult:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        try:
            return await session.call_tool(name, dict(arguments))
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise McpCallFailed(f"{exc.message} (error {exc.code})") from None
            reason = "the connection closed"
        except Exception as exc:  # the transport's errors: a closed stream, a refused POST
            reason = _reason(exc)
        await self._stop_holder()
        raise McpUnavailable(f"{self.spec.label} stopped answering: {reason}")

    async def _stop_holder(self) -> None:
        holder, self._holder = self._holder, None
        self._session = None
        if holder is None:
            return
        self._closing.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await holder

    async def aclose(self) -> None:
        """Close the session (a stdio server is stopped)."""
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        await self._stop_holder()


def _import_sdk() -> None:
    import httpx2  # noqa: F401
    import jsonschema.validators  # noqa: F401
    import mcp
    import mcp.client.streamable_http  # noqa: F401


async def _list_tools(session: ClientSession) -> dict[str, ServerTool]:
    from mcp.types import PaginatedRequestParams

    tools: dict[str, ServerTool] = {}
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            tools[tool.name] = ServerTool(tool.name, tool.description or "", tool.input_schema)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _reason(exc: BaseException) -> str:
    """The innermost meaningful error of `exc` (task groups wrap them), as text."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpUnavailable):
        return str(exc)
    from mcp import MCPError

    if isinstance(exc, MCPError):
        return f"{exc.message} (error {exc.code})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
