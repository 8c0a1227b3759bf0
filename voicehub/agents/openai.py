"""OpenAI-compatible chat models: Chat Completions streaming through the official `openai` SDK.

Works with OpenAI itself and with local OpenAI-compatible servers (vLLM, llama.cpp, Ollama) through
`base_url`. The SDK is imported lazily so that voicehub runs without the `openai` extra.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from voicehub.errors import ConfigError, MissingExtraError, VoicehubError

if TYPE_CHECKING:
    from openai import APIError, AsyncOpenAI, OpenAIError
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionSystemMessageParam,
        ChatCompletionToolChoiceOptionParam,
        ChatCompletionUserMessageParam,
    )
    from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

__all__ = ["LOCAL_API_KEY_PLACEHOLDER", "LLMProviderError", "OpenAIChatLLM", "TokenUsage"]

LOCAL_API_KEY_PLACEHOLDER = "not-needed"
"""The key sent to a `base_url` server when none is configured; local servers ignore it."""


class LLMProviderError(VoicehubError):
    """The model provider failed: an HTTP error, a lost connection, a timeout or a stream error."""

    def __init__(
        self, message: str, *, model: str, base_url: str, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.model = model
        self.base_url = base_url
        self.status_code = status_code


class TokenUsage(BaseModel):
    """Token counts the server reported for one model turn."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class OpenAIChatLLM:
    """A chat model behind the OpenAI Chat Completions API (or a compatible local server).

    `stream()` yields text deltas as they arrive and each tool call once it is complete.
    Every failure of the provider surfaces as `LLMProviderError`; text already yielded stays valid.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: Any = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        """Build the model; `client` (an `AsyncOpenAI`) overrides api_key/base_url/timeout/retries.

        Without `api_key`, the key comes from `OPENAI_API_KEY`; with `base_url` and no key at all,
        `LOCAL_API_KEY_PLACEHOLDER` is sent, which local servers accept.
        """
        self.model = model
        self.temperature = temperature
        self.timeout = timeout
        self.last_usage: TokenUsage | None = None
        """Usage of the latest turn, if the server sent a usage chunk; reset when a turn starts."""
        self._extra_body = dict(extra_body) if extra_body else None
        self._owns_client = client is None
        self._client: AsyncOpenAI = (
            client if client is not None else _make_client(api_key, base_url, timeout, max_retries)
        )
        self.base_url = str(self._client.base_url)

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            await self._client.close()

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        """Run one model turn: `TextDelta`s as they arrive, then `ToolCallChunk`s at its end."""
        from openai import OpenAIError, omit

        request_messages = _chat_messages(messages)
        tool_params = [_chat_tool(tool) for tool in tools]
        choice = _tool_choice(tool_choice, tools)
        self.last_usage = None
        assembler = _ToolCallAssembler()
        streaming = False
        finished = False
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=request_messages,
                stream=True,
                stream_options={"include_usage": True},
                # OpenAI rejects tool_choice without tools, so both are left out of tool-less turns.
                tools=tool_params if tool_params else omit,
                tool_choice=choice if tool_params and choice is not None else omit,
                temperature=self.temperature if self.temperature is not None else omit,
                extra_body=self._extra_body,
            )
            streaming = True
            async with response:
                async for chunk in response:
                    if chunk.usage is not None:
                        self.last_usage = TokenUsage(
                            prompt_tokens=chunk.usage.prompt_tokens,
                            completion_tokens=chunk.usage.completion_tokens,
                            total_tokens=chunk.usage.total_tokens,
                        )
                    for streamed in chunk.choices:  # one choice: we never ask for n > 1
                        delta = streamed.delta
                        if delta.content:
                            yield TextDelta(text=delta.content)
                        for position, fragment in enumerate(delta.tool_calls or ()):
                            assembler.add(fragment, position)
                        if streamed.finish_reason is not None and not finished:
                            finished = True
                            for call in assembler.finish():
                                if not call.name:
                                    raise self._error("the model streamed a tool call with no name")
                                yield ToolCallChunk(call=call)
        except OpenAIError as exc:
            raise self._provider_error(exc, mid_stream=streaming) from exc
        except json.JSONDecodeError as exc:
            raise self._error(f"the server sent a data line that is not JSON ({exc})") from exc
        if not finished:
            # A clean end of body without finish_reason means a proxy or server cut the turn short.
            raise self._error(
                "the stream ended before the model finished its turn (no finish_reason)"
            )

    def _error(self, detail: str, status_code: int | None = None) -> LLMProviderError:
        return LLMProviderError(
            f"chat model {self.model!r} at {self.base_url}: {detail}",
            model=self.model,
            base_url=self.base_url,
            status_code=status_code,
        )

    def _provider_error(self, exc: OpenAIError, *, mid_stream: bool) -> LLMProviderError:
        from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError

        if isinstance(exc, APITimeoutError):
            return self._error(
                f"no answer within the {self.timeout:g}s timeout; check the server or raise timeout"
            )
        if isinstance(exc, APIConnectionError):
            cause = exc.__cause__
            reason = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            if mid_stream:
                return self._error(f"the connection broke mid-stream ({reason})")
            return self._error(
                f"could not reach the server ({reason}); is it running and reachable?"
            )
        if isinstance(exc, APIStatusError):
            status = exc.status_code
            return self._error(
                f"HTTP {status}: {_server_message(exc)}{_STATUS_HINTS.get(status, '')}", status
            )
        if isinstance(exc, APIError):
            # The SDK raises a bare APIError for an `error` object inside a data chunk.
            return self._error(
                f"the server reported an error in the stream: {_server_message(exc)}"
            )
        return self._error(str(exc))


_STATUS_HINTS = {
    401: " (check api_key or OPENAI_API_KEY)",
    403: " (the key has no access to this model or project)",
    404: " (check the model name and base_url)",
    429: " (rate limited or out of quota; retry later)",
}


def _server_message(exc: APIError) -> str:
    """The `message` of the server's error object, else the SDK's own message."""
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    return exc.message


def _make_client(
    api_key: str | None, base_url: str | None, timeout: float, max_retries: int
) -> AsyncOpenAI:
    try:
        from openai import AsyncOpenAI, OpenAIError
    except ImportError as exc:
        raise MissingExtraError("openai", "openai") from exc
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key and base_url is not None:
        key = LOCAL_API_KEY_PLACEHOLDER  # the SDK refuses to build without a key
    if not key:
        raise ConfigError(
            "no OpenAI API key: set OPENAI_API_KEY, pass api_key=..., "
            "or point base_url at a local OpenAI-compatible server"
        )
    try:
        return AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries)
    except OpenAIError as exc:
        raise ConfigError(f"cannot create the OpenAI client: {exc}") from exc


def _chat_messages(messages: Sequence[ChatMessage]) -> list[ChatCompletionMessageParam]:
    """Map voicehub history to Chat Completions messages."""
    mapped: list[ChatCompletionMessageParam] = []
    for position, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id is None:
                raise VoicehubError(
                    f"messages[{position}] has role 'tool' but no tool_call_id; "
                    "set it to the id of the ToolCall it answers"
                )
            mapped.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant":
            assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
            # An assistant turn that only called tools has no text; omit content rather than "".
            if message.content or not message.tool_calls:
                assistant["content"] = message.content
            if message.tool_calls:
                assistant["tool_calls"] = [_chat_tool_call(call) for call in message.tool_calls]
            if message.name:
                assistant["name"] = message.name
            mapped.append(assistant)
        elif message.role == "system":
            system: ChatCompletionSystemMessageParam = {
                "role": "system",
                "content": message.content,
            }
            if message.name:
                system["name"] = message.name
            mapped.append(system)
        else:
            user: ChatCompletionUserMessageParam = {"role": "user", "content": message.content}
            if message.name:
                user["name"] = message.name
            mapped.append(user)
    return mapped


def _chat_tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _chat_tool(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    """Chat Completions nests the function definition (the Responses API does not)."""
    if tool.description:
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
    return {"type": "function", "function": {"name": tool.name, "parameters": tool.parameters}}


def _tool_choice(
    choice: ToolChoice, tools: Sequence[ToolSpec]
) -> ChatCompletionToolChoiceOptionParam | None:
    """Map a voicehub tool choice; None means "send nothing" (no tools, default behaviour)."""
    names = [tool.name for tool in tools]
    if choice == "auto":
        return "auto" if names else None
    if choice == "none":
        return "none" if names else None
    if choice == "required":
        if not names:
            raise VoicehubError("tool_choice='required' needs at least one tool in this turn")
        return "required"
    if choice not in names:
        offered = ", ".join(repr(name) for name in names) or "none"
        raise VoicehubError(
            f"tool_choice={choice!r} names a tool that is not offered in this turn (offered: "
            f"{offered})"
        )
    return {"type": "function", "function": {"name": choice}}


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _ToolCallAssembler:
    """Joins streamed tool-call fragments by `index`; only the first fragment has id and name."""

    def __init__(self) -> None:
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, _PartialCall] = {}

    def add(self, fragment: ChoiceDeltaToolCall, position: int) -> None:
        # Some servers omit `index` when each call arrives whole in one fragment.
        index = fragment.index if fragment.index is not None else position
        current = self._by_index.get(index)
        # Some servers (Ollama) send every parallel call at index 0: a new id means a new call.
        if current is None or (fragment.id and current.id and fragment.id != current.id):
            current = _PartialCall()
            self._by_index[index] = current
            self._calls.append(current)
        if fragment.id and not current.id:
            current.id = fragment.id
        function = fragment.function
        if function is not None:
            # Set the name once: some servers repeat it on every fragment.
            if function.name and not current.name:
                current.name = function.name
            if function.arguments:
                current.arguments.append(function.arguments)

    def finish(self) -> list[ToolCall]:
        """The calls gathered so far, in the order they started."""
        calls = [
            ToolCall(
                id=partial.id or f"call_{uuid.uuid4().hex[:24]}",
                name=partial.name,
                arguments="".join(partial.arguments) or "{}",
            )
            for partial in self._calls
        ]
        self._calls.clear()
        self._by_index.clear()
        return calls
