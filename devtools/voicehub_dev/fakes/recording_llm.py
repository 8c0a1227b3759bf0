"""An LLM wrapper for tests that keeps the messages the model was given at every call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from voicehub.agents.llm import LLM, ChatMessage, LLMChunk, ToolChoice, ToolSpec


class RecordingLLM:
    """Wraps an LLM and keeps the messages of every model call (`calls[i]`)."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.calls: list[list[ChatMessage]] = []

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        self.calls.append(list(messages))
        async for chunk in self.inner.stream(messages, tools, tool_choice=tool_choice):
            yield chunk
