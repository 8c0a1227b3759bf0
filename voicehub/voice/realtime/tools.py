"""Running one of the model's function calls and shaping its `function_call_output` item."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.agents.tools import Tool, ToolContext

__all__ = ["run_tool_call"]


async def run_tool_call(
    tool: Tool | None, name: str, call_id: str, arguments: str, context: ToolContext
) -> dict[str, str]:
    """Run `tool` (None: the model named a tool the agent does not have) and return the
    `function_call_output` item answering `call_id`. Bad arguments and tool failures become
    error text the model reads, as with the chat models."""
    if tool is None:
        output = f"error: there is no tool named {name!r}"
    else:
        result = await tool.invoke(arguments, dataclasses.replace(context, call_id=call_id))
        output = result.content
    return {"type": "function_call_output", "call_id": call_id, "output": output}
