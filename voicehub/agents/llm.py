"""The model interface agents run on: chat messages in, streamed text and tool calls out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A model's request to call one tool; `arguments` is the raw JSON text the model wrote."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"


class ChatMessage(BaseModel):
    """One message of the conversation the model sees."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(BaseModel):
    """What a model is told about a tool: its name, purpose and JSON-schema parameters."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class TextDelta(BaseModel):
    """A piece of the model's spoken/written answer."""

    model_config = ConfigDict(frozen=True)

    text: str


class ToolCallChunk(BaseModel):
    """A complete tool call, emitted once its arguments are fully streamed."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall


LLMChunk = TextDelta | ToolCallChunk
ToolChoice = Literal["auto", "none", "required"] | str


class LLM(Protocol):
    """A chat model. `stream` yields text deltas and complete tool calls, in order."""

    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]: ...


class LLMResponse(BaseModel):
    """A whole model turn: the text and the tool calls it asked for."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


async def complete(
    llm: LLM,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    *,
    tool_choice: ToolChoice = "auto",
) -> LLMResponse:
    """Run one model turn to the end and gather its text and tool calls."""
    parts: list[str] = []
    calls: list[ToolCall] = []
    async for chunk in llm.stream(messages, tools, tool_choice=tool_choice):
        if isinstance(chunk, TextDelta):
            parts.append(chunk.text)
        else:
            calls.append(chunk.call)
    return LLMResponse(text="".join(parts), tool_calls=calls)
