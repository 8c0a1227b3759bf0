"""Tools of Model Context Protocol servers on a desk (`[[mcp]]` tables).

A desk lists MCP servers (a stdio command or a streamable HTTP URL) and its agents name the
tools they may use as `"<server>.<tool>"` in `tools`. The desk's `McpToolset` connects to each
server when the desk is first used in a process (or `voicehub channels` checks it), lists its
tools, checks the ones the desk names, and keeps the connection open; each call runs through
the same `Tool` path as the builtins (argument validation, tracing span, errors the model
sees), bounded by the server's `timeout` on the runtime's clock.

Nothing here imports the `mcp` SDK until a server is connected: desks without `[[mcp]]`
never pay for it (importing it takes about 1.5 s of CPU).
"""

from voicehub.mcp.names import QualifiedTool, qualified_tool
from voicehub.mcp.servers import HttpServer, McpServerSpec, StdioServer

__all__ = [
    "HttpServer",
    "McpServerSpec",
    "QualifiedTool",
    "StdioServer",
    "qualified_tool",
]
