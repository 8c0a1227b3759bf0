"""Our `Agent`, `LLM` and `Tool`s behind livekit-agents' interfaces.

- :class:`LiveKitAgent` runs a voicehub `Agent` (instructions, model, tools, voice) as a
  livekit ``Agent``.
- :class:`LiveKitLLM` wraps any voicehub `LLM` (the scripted one, OpenAI chat) as a livekit
  ``llm.LLM``: each ``chat()`` converts livekit's ``ChatContext`` to our `ChatMessage` list
  and streams our `TextDelta` / `ToolCallChunk` back as livekit ``ChatChunk``s.
- :func:`livekit_tools` turns our `Tool`s into livekit raw function tools; the handler calls
  ``tool.invoke`` with a `ToolContext` for the call's room. A failed tool's text is raised
  as livekit's ``ToolError`` so the model still reads it (and livekit marks it an error).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Never, TypeAlias

from voicehub.agents.llm import (
    LLM,
    ChatMessage,
    TextDelta,
    ToolCall,
    ToolChoice,
    ToolSpec,
)
from voicehub.agents.tools import Tool, ToolContext
from voicehub.errors import ConfigError
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import Agent as _LKAgent
    from livekit.agents import llm, tts, utils
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )
    from livekit.agents.voice.events import RunContext
    from livekit.agents.voice.speech_handle import SpeechHandle

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent

# A raw function tool whose handler takes (raw_arguments, run context).
LiveKitTool: TypeAlias = "llm.RawFunctionTool[..., Any]"

# The speech whose tool is running, while one of our tools runs inside livekit's executor.
_TOOL_SPEECH: ContextVar[SpeechHandle | None] = ContextVar("voicehub_tool_speech", default=None)

__all__ = [
    "LiveKitAgent",
    "LiveKitLLM",
    "LiveKitTool",
    "hold_tool_speech",
    "livekit_tool",
    "livekit_tools",
    "running_in_tool",
    "to_messages",
    "to_tool_choice",
    "to_tool_specs",
]


class LiveKitAgent(_LKAgent):
    """A voicehub `Agent` as a livekit ``Agent``; its tools run with `context`.

    `voice` overrides the session's TTS; `chat_ctx` carries history over on a handoff.
    `reply_gate(text)` sees each completed caller turn first: False means no reply (the
    turn answers an open question). `entered` is set once livekit made this the live agent.
    """

    def __init__(
        self,
        spec: Agent,
        context: ToolContext,
        *,
        extra_tools: Sequence[Tool] = (),
        voice: tts.TTS[Any] | None = None,
        chat_ctx: llm.ChatContext | None = None,
        reply_gate: Callable[[str], bool] | None = None,
    ) -> None:
        if spec.llm is None:
            raise ConfigError(
                f"agent {spec.id!r} has no llm: give it a ScriptedLLM or a chat model"
            )
        super().__init__(
            instructions=spec.instructions,
            id=spec.id,
            llm=LiveKitLLM(spec.llm),
            tools=list(livekit_tools((*spec.tools, *extra_tools), context)),
            tts=voice if voice is not None else NOT_GIVEN,
            chat_ctx=chat_ctx if chat_ctx is not None else NOT_GIVEN,
        )
        self.spec = spec
        self.entered = asyncio.Event()
        self._reply_gate = reply_gate

    async def on_enter(self) -> None:
        """livekit's hook when this agent becomes active."""
        self.entered.set()

    async def on_user_turn_completed(
        self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage
    ) -> None:
        """livekit's hook before it answers a caller turn: `reply_gate` may stop the reply."""
        gate = self._reply_gate
        if gate is not None and not gate(new_message.text_content or ""):
            raise llm.StopResponse()


class LiveKitLLM(llm.LLM[Never]):  # Never: no events beyond livekit's own
    """A voicehub `LLM` as a livekit-agents ``llm.LLM`` (one per agent; cheap to build)."""

    def __init__(self, model: LLM, *, name: str | None = None) -> None:
        super().__init__()
        self.wrapped = model
        self._name = name or type(model).__name__

    @property
    def model(self) -> str:
        """The wrapped model's class name (or the given name), for livekit metrics."""
        return self._name

    @property
    def provider(self) -> str:
        """Always ``"voicehub"``."""
        return "voicehub"

    def chat(
        self,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool] | None = None,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
        parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
        tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
        extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
    ) -> llm.LLMStream:
        """Start one model turn over `chat_ctx`; iterate the stream for chunks."""
        return _LiveKitLLMStream(
            self,
            chat_ctx=chat_ctx,
            tools=tools or [],
            conn_options=conn_options,
            tool_choice=to_tool_choice(tool_choice),
        )


class _LiveKitLLMStream(llm.LLMStream):
    def __init__(
        self,
        owner: LiveKitLLM,
        *,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        conn_options: APIConnectOptions,
        tool_choice: ToolChoice,
    ) -> None:
        super().__init__(owner, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self._wrapped = owner.wrapped
        self._choice = tool_choice

    async def _run(self) -> None:
        request_id = utils.shortuuid("vh_")
        messages = to_messages(self._chat_ctx)
        specs = to_tool_specs(self._tools)
        send = self._event_ch.send_nowait
        async for chunk in self._wrapped.stream(messages, specs, tool_choice=self._choice):
            if isinstance(chunk, TextDelta):
                if chunk.text:
                    delta = llm.ChoiceDelta(role="assistant", content=chunk.text)
                    send(llm.ChatChunk(id=request_id, delta=delta))
                continue
            call = llm.FunctionToolCall(
                name=chunk.call.name, arguments=chunk.call.arguments, call_id=chunk.call.id
            )
            delta = llm.ChoiceDelta(role="assistant", tool_calls=[call])
            send(llm.ChatChunk(id=request_id, delta=delta))


# -- conversions --------------------------------------------------------------------------


def to_messages(chat_ctx: llm.ChatContext) -> list[ChatMessage]:
    """livekit's history as our messages, in the shape chat models require.

    Consecutive function calls join the assistant message before them (the OpenAI shape:
    one assistant message with its tool calls, then one tool message per call). A call
    without an output, or an output without its call, is dropped: chat APIs reject both.
    What was said while a tool ran (an ask_user question) goes before the call, which stays
    next to its output. Empty messages, handoff and config-update items, images and audio
    are left out.
    """
    items = chat_ctx.items
    answered = {i.call_id for i in items if isinstance(i, llm.FunctionCallOutput)}
    messages: list[ChatMessage] = []
    called: set[str] = set()
    for item in items:
        if isinstance(item, llm.ChatMessage):
            text = item.text_content
            if not text:
                continue  # nothing for a text model (an empty system prompt, an image)
            role = "system" if item.role in ("system", "developer") else item.role
            messages.append(ChatMessage(role=role, content=text))
        elif isinstance(item, llm.FunctionCall):
            if item.call_id not in answered:
                continue
            called.add(item.call_id)
            call = ToolCall(id=item.call_id, name=item.name, arguments=item.arguments or "{}")
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                merged = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
                messages[-1] = merged
            else:
                messages.append(ChatMessage(role="assistant", tool_calls=(call,)))
        elif isinstance(item, llm.FunctionCallOutput) and item.call_id in called:
            _call_next_to_output(messages, item.call_id)
            messages.append(
                ChatMessage(
                    role="tool", content=item.output, tool_call_id=item.call_id, name=item.name
                )
            )
    return messages


def _call_next_to_output(messages: list[ChatMessage], call_id: str) -> None:
    """Move the tool calls holding `call_id` (with the outputs they have) to the end, after
    messages spoken while the tool ran; their text stays where it was said."""
    owner = next(i for i, m in enumerate(messages) if any(c.id == call_id for c in m.tool_calls))
    end = owner + 1
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    if end == len(messages):
        return  # already adjacent
    calls, outputs = messages[owner], messages[owner + 1 : end]
    del messages[owner + 1 : end]
    if calls.content:
        messages[owner] = calls.model_copy(update={"tool_calls": ()})
    else:
        del messages[owner]
    messages += [ChatMessage(role="assistant", tool_calls=calls.tool_calls), *outputs]


def to_tool_specs(tools: Sequence[llm.Tool]) -> list[ToolSpec]:
    """What our `LLM` is told about livekit tools (raw schemas and ``@function_tool``s)."""
    specs: list[ToolSpec] = []
    for tool in tools:
        if isinstance(tool, llm.RawFunctionTool):
            schema: dict[str, Any] = tool.info.raw_schema
        elif isinstance(tool, llm.FunctionTool):
            schema = llm.utils.build_legacy_openai_schema(tool)["function"]
        else:
            continue  # provider tools run inside a vendor's model, not ours
        specs.append(
            ToolSpec(
                name=schema["name"],
                description=schema.get("description") or "",
                parameters=schema.get("parameters") or {"type": "object", "properties": {}},
            )
        )
    return specs


def to_tool_choice(choice: NotGivenOr[llm.ToolChoice]) -> ToolChoice:
    """livekit's tool choice as ours: a named function becomes its name."""
    if not utils.is_given(choice):
        return "auto"
    if isinstance(choice, str):
        return choice
    return choice["function"]["name"]


# -- tools --------------------------------------------------------------------------------


def livekit_tool(tool: Tool, context: ToolContext) -> LiveKitTool:
    """`tool` as a livekit raw function tool running with `context` (plus the call id)."""

    async def invoke(raw_arguments: dict[str, Any], run_ctx: RunContext[Any]) -> str:
        scoped = dataclasses.replace(context, call_id=run_ctx.function_call.call_id)
        token = _TOOL_SPEECH.set(run_ctx.speech_handle)
        try:
            result = await tool.invoke(raw_arguments, scoped)
        finally:
            _TOOL_SPEECH.reset(token)
        if result.is_error:
            # livekit puts a ToolError's message in the output, flagged as an error
            raise llm.ToolError(result.content)
        return result.content

    spec = tool.spec
    schema = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    return llm.function_tool(invoke, raw_schema=schema)


def livekit_tools(tools: Sequence[Tool], context: ToolContext) -> list[LiveKitTool]:
    """Each of `tools` as a livekit raw function tool (a later tool wins a name clash)."""
    by_name = {tool.name: tool for tool in tools}
    return [livekit_tool(tool, context) for tool in by_name.values()]


def running_in_tool() -> bool:
    """Whether the caller runs inside one of our tools invoked by livekit (livekit finishes
    the tool's speech before it switches agents, so a handoff must not wait for that)."""
    return _TOOL_SPEECH.get() is not None


@contextlib.contextmanager
def hold_tool_speech() -> Iterator[None]:
    """Within one of our tools: the caller's turns may not interrupt the speech running the
    tool until the block ends. livekit interrupts it at each caller turn, and an interrupted
    speech drops the tool's reply; a tool that waits for the caller's answer (ask_user)
    holds it. Elsewhere, or on a speech already interrupted, this does nothing."""
    speech = _TOOL_SPEECH.get()
    if speech is None or speech.interrupted or not speech.allow_interruptions:
        yield
        return
    speech.allow_interruptions = False
    try:
        yield
    finally:
        if not speech.interrupted:  # a forced interrupt cannot be undone
            speech.allow_interruptions = True
