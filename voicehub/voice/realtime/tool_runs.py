"""The model's function calls on a call: run in tasks, recorded, answered together.

A call runs on ``response.function_call_arguments.done`` (the event reader never waits on a
tool); the outputs of one response go back as ``function_call_output`` items once that
response is done. `running` counts calls not yet answered: the model counts as busy
(thinking) until it is back to zero, even while a tool speaks through the session
(`ask_user` asks its question aloud from inside its tool, see `in_tool`).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from voicehub.agents.tools import ToolContext
from voicehub.core.events import EventKind
from voicehub.voice.events import ToolCall
from voicehub.voice.realtime.tools import run_tool_call

if TYPE_CHECKING:
    from voicehub.agents.tools import Tool
    from voicehub.voice.realtime.recorder import CallRecorder
    from voicehub.voice.realtime.responses import ModelResponse
    from voicehub.voice.session import CallRuntime

__all__ = ["ToolRuns", "in_tool"]

_IN_TOOL: contextvars.ContextVar[bool] = contextvars.ContextVar("realtime_in_tool", default=False)


def in_tool() -> bool:
    """Whether the running code is one of the model's tool calls (a tool may speak through
    the session at once: the response that called it is done, nothing else may start)."""
    return _IN_TOOL.get()


class ToolRuns:
    """Starts and records the tool calls of one call."""

    def __init__(self, hub: CallRuntime, room_id: str, recorder: CallRecorder) -> None:
        self.hub, self.room_id, self.recorder = hub, room_id, recorder
        self.running = 0

    def start(
        self,
        response: ModelResponse,
        tools: Sequence[Tool],
        agent_id: str,
        event: dict[str, Any],
    ) -> None:
        """Run the call `event` names (a ``function_call_arguments.done``) for `response`."""
        name, call_id = str(event["name"]), str(event["call_id"])
        arguments = event.get("arguments")
        tool = next((t for t in tools if t.name == name), None)
        context = ToolContext(hub=self.hub, room_id=self.room_id, agent_id=agent_id)
        self.running += 1
        task = asyncio.create_task(self._run(tool, name, call_id, arguments, context))
        response.tool_calls.append(task)

    async def outputs(self, response: ModelResponse) -> list[dict[str, str]]:
        """The `function_call_output` items of `response`'s calls, once all are done."""
        try:
            return list(await asyncio.gather(*response.tool_calls))
        finally:
            self.running -= len(response.tool_calls)

    async def _run(
        self, tool: Tool | None, name: str, call_id: str, arguments: Any, context: ToolContext
    ) -> dict[str, str]:
        _IN_TOOL.set(True)  # this task's context only
        meta = {"tool": name, "call_id": call_id}
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        self.recorder.post(EventKind.TOOL_CALL, str(arguments or "{}"), **meta)
        self.recorder.send_client(ToolCall(name=name, arguments=text, call_id=call_id))
        output = await run_tool_call(tool, name, call_id, str(arguments or "{}"), context)
        self.recorder.post(EventKind.TOOL_RESULT, output["output"], **meta)
        return output
