"""OpenAIChatLLM through the real `openai` client against the fake Chat Completions server."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
    complete,
)
from voicehub.agents.openai import (
    LOCAL_API_KEY_PLACEHOLDER,
    LLMProviderError,
    OpenAIChatLLM,
    TokenUsage,
)
from voicehub.errors import ConfigError, MissingExtraError, VoicehubError
from voicehub_dev.fakes.openai_chat import (
    Disconnect,
    FakeOpenAIServer,
    FakeToolCall,
    HTTPError,
    RawStream,
    Reply,
    Script,
    Stall,
    StreamError,
)

MODEL = "gpt-4o-mini"

LOOKUP_ORDER = ToolSpec(
    name="lookup_order",
    description="Find an order by id.",
    parameters={
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
)
CHECK_STOCK = ToolSpec(name="check_stock", parameters={"type": "object", "properties": {}})

ASK = [
    ChatMessage(role="system", content="You are a support desk."),
    ChatMessage(role="user", content="Where is order 42?"),
]


@asynccontextmanager
async def running(
    script: Script, **options: Any
) -> AsyncIterator[tuple[FakeOpenAIServer, OpenAIChatLLM]]:
    """A fake server and a model pointed at it; no retries unless a test asks for them."""
    async with FakeOpenAIServer(script) as server:
        options.setdefault("max_retries", 0)
        llm = OpenAIChatLLM(MODEL, api_key=server.api_key, base_url=server.base_url, **options)
        try:
            yield server, llm
        finally:
            await llm.aclose()


async def collect(
    llm: OpenAIChatLLM,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    tool_choice: ToolChoice = "auto",
) -> list[LLMChunk]:
    return [chunk async for chunk in llm.stream(messages, tools, tool_choice=tool_choice)]


async def test_text_answer_streams_in_several_deltas() -> None:
    async with running([Reply(text=("Order 42 ", "ships ", "tomorrow."))]) as (server, llm):
        chunks = await collect(llm, ASK)

    assert chunks == [
        TextDelta(text="Order 42 "),
        TextDelta(text="ships "),
        TextDelta(text="tomorrow."),
    ]
    assert llm.last_usage == TokenUsage(prompt_tokens=12, completion_tokens=7, total_tokens=19)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {server.api_key}"
    assert request.body["model"] == MODEL
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert "tools" not in request.body and "tool_choice" not in request.body
    assert request.messages == [
        {"role": "system", "content": "You are a support desk."},
        {"role": "user", "content": "Where is order 42?"},
    ]


async def test_tool_call_round_trip() -> None:
    script = [
        Reply(tool_calls=[FakeToolCall("lookup_order", ('{"order_id":', '"42"}'), id="call_abc")]),
        Reply(text=("Order 42 has ", "shipped.")),
    ]
    async with running(script) as (server, llm):
        first = await complete(llm, ASK, [LOOKUP_ORDER])
        assert first.text == ""
        assert first.tool_calls == [
            ToolCall(id="call_abc", name="lookup_order", arguments='{"order_id":"42"}')
        ]
        history = [
            *ASK,
            ChatMessage(role="assistant", tool_calls=tuple(first.tool_calls)),
            ChatMessage(role="tool", tool_call_id="call_abc", content='{"status":"shipped"}'),
        ]
        second = await complete(llm, history, [LOOKUP_ORDER])

    assert second.text == "Order 42 has shipped."
    assert second.tool_calls == []
    first_request, follow_up = server.requests
    assert first_request.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "lookup_order",
                "description": "Find an order by id.",
                "parameters": LOOKUP_ORDER.parameters,
            },
        }
    ]
    assert first_request.body["tool_choice"] == "auto"
    assert follow_up.messages[-2:] == [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id":"42"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"status":"shipped"}'},
    ]


async def test_two_parallel_tool_calls_in_one_turn() -> None:
    reply = Reply(
        text=("Checking both.",),
        tool_calls=[
            FakeToolCall("lookup_order", ('{"order', '_id": "42"}'), id="call_1"),
            FakeToolCall("check_stock", ("{", "}"), id="call_2"),
        ],
    )
    async with running([reply]) as (_server, llm):
        chunks = await collect(llm, ASK, [LOOKUP_ORDER, CHECK_STOCK])

    assert chunks == [
        TextDelta(text="Checking both."),
        ToolCallChunk(
            call=ToolCall(id="call_1", name="lookup_order", arguments='{"order_id": "42"}')
        ),
        ToolCallChunk(call=ToolCall(id="call_2", name="check_stock", arguments="{}")),
    ]


@pytest.mark.parametrize(
    ("tool_choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("lookup_order", {"type": "function", "function": {"name": "lookup_order"}}),
    ],
)
async def test_tool_choice_is_mapped_in_the_request(tool_choice: str, sent: object) -> None:
    async with running([Reply(text=("ok",))]) as (server, llm):
        await collect(llm, ASK, [LOOKUP_ORDER, CHECK_STOCK], tool_choice=tool_choice)

    assert server.requests[0].body["tool_choice"] == sent


async def test_tool_choice_naming_an_absent_tool_fails_before_sending() -> None:
    async with running([Reply(text=("ok",))]) as (server, llm):
        with pytest.raises(VoicehubError, match=r"'cancel_order'.*offered: 'lookup_order'"):
            await collect(llm, ASK, [LOOKUP_ORDER], tool_choice="cancel_order")

    assert server.requests == []


async def test_tool_message_without_tool_call_id_fails_before_sending() -> None:
    history = [*ASK, ChatMessage(role="tool", content="shipped")]
    async with running([Reply(text=("ok",))]) as (server, llm):
        with pytest.raises(VoicehubError, match=r"messages\[2\].*tool_call_id"):
            await collect(llm, history)

    assert server.requests == []


async def test_bad_api_key_becomes_provider_error() -> None:
    async with FakeOpenAIServer([Reply(text=("never",))]) as server:
        llm = OpenAIChatLLM(MODEL, api_key="sk-wrong-key", base_url=server.base_url)
        with pytest.raises(LLMProviderError) as caught:
            await collect(llm, ASK)
        await llm.aclose()

    message = str(caught.value)
    assert caught.value.status_code == 401
    assert "HTTP 401: Incorrect API key provided" in message
    assert MODEL in message and server.base_url in message
    assert "OPENAI_API_KEY" in message
    assert len(server.requests) == 1  # 401 is not retried


async def test_server_error_status_becomes_provider_error() -> None:
    async with running([HTTPError(500, "The server had an error processing your request.")]) as (
        _server,
        llm,
    ):
        with pytest.raises(LLMProviderError, match="HTTP 500: The server had an error") as caught:
            await collect(llm, ASK)

    assert caught.value.status_code == 500


async def test_rate_limit_is_retried_when_retries_are_enabled() -> None:
    limited = HTTPError(
        429,
        "Rate limit reached for requests",
        "requests",
        code="rate_limit_exceeded",
        headers={"retry-after-ms": "1"},
    )
    async with running([limited, Reply(text=("ok",))], max_retries=1) as (server, llm):
        chunks = await collect(llm, ASK)

    assert chunks == [TextDelta(text="ok")]
    assert len(server.requests) == 2


async def test_bad_request_carries_the_server_message() -> None:
    # A tool result with no preceding tool call: OpenAI (and the fake) answer 400.
    history = [*ASK, ChatMessage(role="tool", tool_call_id="call_x", content="shipped")]
    async with running([Reply(text=("never",))]) as (_server, llm):
        with pytest.raises(LLMProviderError, match="HTTP 400: Invalid parameter: messages"):
            await collect(llm, history)


async def test_connection_dropped_mid_stream_becomes_provider_error() -> None:
    received: list[LLMChunk] = []
    async with running([Disconnect(after_chunks=2)]) as (_server, llm):
        with pytest.raises(LLMProviderError, match="connection broke mid-stream"):
            async for chunk in llm.stream(ASK):
                received.append(chunk)

    assert received == [TextDelta(text="Let me ")]  # text before the break was delivered


async def test_stream_ending_without_finish_reason_becomes_provider_error() -> None:
    async with running([Disconnect(after_chunks=3, abrupt=False)]) as (_server, llm):
        with pytest.raises(LLMProviderError, match="ended before the model finished"):
            await collect(llm, ASK)


async def test_error_object_in_a_data_chunk_becomes_provider_error() -> None:
    step = StreamError("The model is overloaded. Please retry.", after_chunks=2)
    async with running([step]) as (_server, llm):
        with pytest.raises(LLMProviderError, match="error in the stream: The model is overloaded"):
            await collect(llm, ASK)


async def test_data_line_that_is_not_json_becomes_provider_error() -> None:
    async with running([RawStream(["{not json", "[DONE]"])]) as (_server, llm):
        with pytest.raises(LLMProviderError, match="not JSON"):
            await collect(llm, ASK)


async def test_unreachable_server_becomes_provider_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = OpenAIChatLLM(MODEL, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(
        LLMProviderError, match=r"could not reach the server \(ConnectError.*is it running"
    ):
        await collect(llm, ASK)
    await llm.aclose()


async def test_timeout_becomes_provider_error() -> None:
    async with running([Stall()], timeout=0.05) as (_server, llm):
        with pytest.raises(LLMProviderError, match=r"no answer within the 0\.05s timeout"):
            await collect(llm, ASK)


async def test_quirky_server_reusing_index_zero_for_parallel_calls() -> None:
    # Some OpenAI-compatible servers send each parallel call whole, all at index 0.
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0,
                           "model": MODEL, "choices": [choice]})  # fmt: skip

    def whole(call_id: str, name: str, arguments: str) -> dict[str, Any]:
        call = {"index": 0, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": arguments}}  # fmt: skip
        return {"role": "assistant", "tool_calls": [call]}

    raw = RawStream(
        [
            chunk(whole("call_a", "lookup_order", '{"order_id": "1"}')),
            chunk(whole("call_b", "lookup_order", '{"order_id": "2"}')),
            chunk({}, "tool_calls"),
            "[DONE]",
        ]
    )
    async with running([raw]) as (_server, llm):
        result = await complete(llm, ASK, [LOOKUP_ORDER])

    assert [(call.id, call.arguments) for call in result.tool_calls] == [
        ("call_a", '{"order_id": "1"}'),
        ("call_b", '{"order_id": "2"}'),
    ]
    assert llm.last_usage is None  # this server sent no usage chunk


async def test_temperature_and_extra_body_are_sent() -> None:
    async with running([Reply(text=("ok",))], temperature=0.2, extra_body={"top_k": 5}) as (
        server,
        llm,
    ):
        await collect(llm, ASK)

    assert server.requests[0].body["temperature"] == 0.2
    assert server.requests[0].body["top_k"] == 5


async def test_local_server_without_key_gets_a_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with FakeOpenAIServer([Reply(text=("hi",))], api_key=None) as server:
        llm = OpenAIChatLLM("llama3.1", base_url=server.base_url)
        assert await collect(llm, ASK) == [TextDelta(text="hi")]
        await llm.aclose()

    assert server.requests[0].headers["authorization"] == f"Bearer {LOCAL_API_KEY_PLACEHOLDER}"


async def test_api_key_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeOpenAIServer([Reply(text=("hi",))]) as server:
        assert server.api_key is not None
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        llm = OpenAIChatLLM(MODEL, base_url=server.base_url)
        assert await collect(llm, ASK) == [TextDelta(text="hi")]
        await llm.aclose()


def test_no_key_and_no_base_url_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        OpenAIChatLLM(MODEL)


def test_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` raise ImportError
    with pytest.raises(MissingExtraError, match=r"voicehub\[openai\]"):
        OpenAIChatLLM(MODEL, api_key="sk-test")


async def test_fake_answers_non_stream_requests_too() -> None:
    from openai import AsyncOpenAI

    reply = Reply(text=("Hello", "!"), tool_calls=[FakeToolCall("check_stock", id="call_9")])
    async with FakeOpenAIServer([reply]) as server:
        client = AsyncOpenAI(api_key=server.api_key, base_url=server.base_url)
        completion = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        await client.close()

    assert completion.object == "chat.completion"
    message = completion.choices[0].message
    assert message.content == "Hello!"
    assert message.tool_calls is not None
    assert message.tool_calls[0].id == "call_9"
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.total_tokens == 19
