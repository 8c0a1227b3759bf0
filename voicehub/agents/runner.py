"""The agent runner: the tool loop.

Each step asks the model for a turn; tool calls are validated and executed and their results
fed back. The run stops on a final answer (a turn without tool calls), when a named stop tool
is called successfully, or at the step limit (default 30).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from voicehub.agents.agent import Agent
from voicehub.agents.llm import ChatMessage, ToolCall, ToolChoice, complete
from voicehub.agents.tools import Tool, ToolContext, ToolResult
from voicehub.errors import ConfigError

PrepareStep = Callable[[int, list[ChatMessage]], Awaitable[list[ChatMessage]] | list[ChatMessage]]
ToolObserver = Callable[[ToolCall, ToolResult], Awaitable[None]]
TextObserver = Callable[[str], Awaitable[None]]


class StopReason(StrEnum):
    FINAL_ANSWER = "final_answer"
    STOP_TOOL = "stop_tool"
    STEP_LIMIT = "step_limit"


@dataclass
class RunResult:
    """What a run produced. `text` is the final answer (or the last text spoken)."""

    text: str
    stop_reason: StopReason
    steps: int
    messages: list[ChatMessage]
    tool_calls: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    stopped_by: tuple[ToolCall, ToolResult] | None = None

    @property
    def stop_call(self) -> tuple[ToolCall, ToolResult] | None:
        """The stop tool call that ended the run, if any."""
        return self.stopped_by

    def calls_to(self, name: str) -> list[tuple[ToolCall, ToolResult]]:
        return [pair for pair in self.tool_calls if pair[0].name == name]


async def run_agent(
    agent: Agent,
    messages: Sequence[ChatMessage],
    *,
    context: ToolContext | None = None,
    extra_tools: Sequence[Tool] = (),
    stop_tools: Sequence[str] = (),
    max_steps: int | None = None,
    prepare_step: PrepareStep | None = None,
    on_tool_result: ToolObserver | None = None,
    on_interim_text: TextObserver | None = None,
    tool_choice: ToolChoice = "auto",
) -> RunResult:
    """Run `agent` over `messages` until a final answer, a stop tool, or the step limit.

    `prepare_step(step, messages)` returns the messages the model sees at that step, so state
    (a blackboard summary, say) can be injected without growing the history.
    `on_interim_text` receives text the model says in the same turn as tool calls ("Sure, I'll
    look into it"), before the tools run, so a caller hears it without waiting for them.
    """
    if agent.llm is None:
        raise ConfigError(f"agent {agent.id!r} has no llm: give it a ScriptedLLM or a chat model")
    tools = {t.name: t for t in (*agent.tools, *extra_tools)}
    specs = [t.spec for t in tools.values()]
    history = list(messages)
    if agent.instructions and not (history and history[0].role == "system"):
        history.insert(0, ChatMessage(role="system", content=agent.instructions))
    base_context = context or ToolContext(agent_id=agent.id)
    limit = max_steps or agent.max_steps
    calls: list[tuple[ToolCall, ToolResult]] = []
    spoken: list[str] = []
    for step in range(1, limit + 1):
        seen = history
        if prepare_step is not None:
            prepared = prepare_step(step, list(history))
            seen = await prepared if inspect.isawaitable(prepared) else prepared
        turn = await complete(agent.llm, seen, specs, tool_choice=tool_choice)
        history.append(
            ChatMessage(role="assistant", content=turn.text, tool_calls=tuple(turn.tool_calls))
        )
        if turn.text:
            spoken.append(turn.text)
        if not turn.tool_calls:
            return RunResult(turn.text, StopReason.FINAL_ANSWER, step, history, calls)
        if turn.text and on_interim_text is not None:
            await on_interim_text(turn.text)
        stopped_by: tuple[ToolCall, ToolResult] | None = None
        for call in turn.tool_calls:
            result = await _execute(call, tools, base_context)
            calls.append((call, result))
            history.append(
                ChatMessage(
                    role="tool", content=result.content, tool_call_id=call.id, name=call.name
                )
            )
            if on_tool_result is not None:
                await on_tool_result(call, result)
            # A stop tool that failed (bad arguments, say) does not stop the run: the model
            # sees the error and can call it again correctly.
            if call.name in stop_tools and not result.is_error:
                stopped_by = (call, result)
        if stopped_by is not None:
            return RunResult(turn.text, StopReason.STOP_TOOL, step, history, calls, stopped_by)
    return RunResult(spoken[-1] if spoken else "", StopReason.STEP_LIMIT, limit, history, calls)


async def _execute(call: ToolCall, tools: dict[str, Tool], context: ToolContext) -> ToolResult:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(
            call.id,
            call.name,
            f"error: unknown tool {call.name!r}; available tools: {known}",
            is_error=True,
        )
    scoped = ToolContext(
        hub=context.hub,
        room_id=context.room_id,
        agent_id=context.agent_id,
        call_id=call.id,
        state=context.state,
    )
    return await tool.invoke(call.arguments, scoped)
