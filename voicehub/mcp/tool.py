"""An MCP server's tool as a voicehub `Tool`: the same path as the builtins.

`Tool.invoke` runs it (the tracing span, errors as results the model sees, never raised);
this class supplies what differs: the parameters are the server's JSON Schema (checked here,
so a model's mistake comes back as "bad arguments" without a round trip), and the call goes
to the server, bounded by the server's `timeout` on the runtime's clock.

A failure answers the desk's `on_error` text when it has one (what a scripted `reply =
"{result}"` speaks), else the error naming the server, the desk and the tool; the log gets
the error either way. The call goes on: the model sees the result like any other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from voicehub.agents.llm import ToolSpec
from voicehub.agents.tools import Tool, ToolContext, ToolResult
from voicehub.core.clock import Clock
from voicehub.mcp.connection import McpCallFailed, ServerTool
from voicehub.mcp.names import QualifiedTool
from voicehub.mcp.servers import McpServerSpec, McpUnavailable

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from mcp.types import CallToolResult

    from voicehub.mcp.toolset import McpToolset

log = logging.getLogger("voicehub.mcp")

__all__ = ["McpTool"]

PLACEHOLDER_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}}


class McpTool(Tool):
    """Tool `qualified.tool` of the desk's server `qualified.server`. Its description and
    parameters are the server's once `describe` has run (at discovery); until then a
    placeholder the model can still call (the call connects first)."""

    def __init__(self, qualified: QualifiedTool, server: McpServerSpec, toolset: McpToolset):
        # Not Tool.__init__: there is no Python function, the server's schema is the model.
        self.qualified = qualified
        self.server = server
        self.toolset = toolset
        self.name = qualified.tool
        self.description = f"Tool {qualified.tool} of the {server.name} server."
        self.context_parameter = None
        self.spec = ToolSpec(
            name=self.name, description=self.description, parameters=dict(PLACEHOLDER_PARAMETERS)
        )
        self._validator: Validator | None = None

    def describe(self, listed: ServerTool) -> None:
        """Take the server's description and parameters (`listed`, already checked)."""
        from jsonschema.validators import validator_for

        schema = dict(listed.input_schema)
        self.description = listed.description or self.description
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        self._validator = validator_for(schema)(schema)

    async def _invoke(
        self, arguments: str | Mapping[str, Any], context: ToolContext | None
    ) -> ToolResult:
        call_id = context.call_id if context else ""
        raw = self._json_object(arguments, call_id)
        if isinstance(raw, ToolResult):
            return raw
        clock = _clock_of(context, self.toolset.clock)
        try:
            connection = await self.toolset.connected(self.qualified.server, clock)
        except McpUnavailable as exc:
            return self._failed(call_id, f"{exc}; the call goes on without {self.name}")
        if self.qualified.tool not in connection.tools:
            return self._failed(call_id, self.toolset.missing_tool(self.qualified))
        if self._validator is not None:
            problems = [_problem(error) for error in self._validator.iter_errors(raw)]
            if problems:
                return self._error(call_id, "bad arguments: " + "; ".join(problems))
        try:
            answer = await connection.call(clock, self.qualified.tool, raw)
        except TimeoutError as exc:
            return self._failed(call_id, f"{self.server.label}: tool {self.name!r}: {exc}")
        except McpUnavailable as exc:
            return self._failed(call_id, f"{exc} (during {self.name!r}); the call goes on")
        except McpCallFailed as exc:
            return self._failed(call_id, f"{self.server.label}: tool {self.name!r}: {exc}")
        text, data = _answer_text(answer)
        if answer.is_error:
            return self._failed(call_id, f"{self.server.label}: tool {self.name!r} failed: {text}")
        return ToolResult(call_id, self.name, text, data=data)

    def _failed(self, call_id: str, detail: str) -> ToolResult:
        """A failure of the server or the tool: the desk's `on_error`, else `detail`."""
        log.warning("%s", detail)
        if self.server.on_error is not None:
            return ToolResult(call_id, self.name, self.server.on_error, is_error=True)
        return self._error(call_id, detail)

    def __repr__(self) -> str:
        return f"McpTool({str(self.qualified)!r})"


def _clock_of(context: ToolContext | None, otherwise: Clock) -> Clock:
    """The clock of the room's runtime, else the one the toolset was opened on."""
    hub = context.hub if context is not None else None
    return hub.clock if hub is not None else otherwise


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"arguments.{where}: {error.message}" if where else f"arguments: {error.message}"


def _answer_text(answer: CallToolResult) -> tuple[str, Any]:
    """What the model sees of an answer, and its data: the text blocks (a server sends its
    structured content as JSON text too), else the structured content as JSON; other
    blocks are named by their kind."""
    from mcp.types import TextContent

    parts = [
        block.text if isinstance(block, TextContent) else f"[{block.type}]"
        for block in answer.content
    ]
    text = "\n".join(part for part in parts if part)
    if not text and answer.structured_content is not None:
        text = json.dumps(answer.structured_content)
    return text or "done", answer.structured_content
