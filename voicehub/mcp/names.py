"""How a desk file names MCP tools and the environment variables that hold secrets.

An agent's `tools` lists an MCP tool as `"<server>.<tool>"`: the `[[mcp]]` table's name, a
dot, and the tool's name on that server. The model is offered the tool under its own name
(`<tool>`), which must suit every model API voicehub speaks (OpenAI's function names:
letters, digits, `_` and `-`, at most 64 characters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SERVER_NAME = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
MODEL_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


@dataclass(frozen=True, slots=True)
class QualifiedTool:
    """`server.tool` as a desk file names it."""

    server: str
    tool: str

    def __str__(self) -> str:
        return f"{self.server}.{self.tool}"


def qualified_tool(name: str) -> QualifiedTool | None:
    """`name` split at its first dot into server and tool; None for a name without a dot
    (a builtin). Raises ValueError for a dotted name that is not `<server>.<tool>`."""
    if "." not in name:
        return None
    server, tool = name.split(".", 1)
    if not SERVER_NAME.fullmatch(server):
        raise ValueError(
            f"{name!r}: an MCP tool is named '<server>.<tool>' and {server!r} is not a server "
            "name (lowercase letters, digits, - and _)"
        )
    if not MODEL_TOOL_NAME.fullmatch(tool):
        raise ValueError(
            f"{name!r}: {tool!r} cannot be offered to a model: tool names are letters, "
            "digits, _ and - (at most 64)"
        )
    return QualifiedTool(server, tool)
