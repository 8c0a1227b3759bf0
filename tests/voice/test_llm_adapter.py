"""Our LLM and tools behind livekit-agents: conversions, streaming, and a real tool loop."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from livekit.agents import NOT_GIVEN, AgentSession, function_tool, llm
from livekit.agents import Agent as LKAgent
from livekit.agents.voice.run_result import RunResult

from voicehub.agents.llm import ChatMessage, TextDelta, ToolCall, ToolCallChunk
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import ToolContext, tool
from voicehub.errors import ToolError
from voicehub.voice.llm_adapter import (
    LiveKitLLM,
    livekit_tool,
    livekit_tools,
    to_messages,
    to_tool_choice,
    to_tool_specs,
)

RULES: list[dict[str, Any]] = [
    {
        "match": ["solar"],
        "say": "Let me look into that.",
        "tool": "research",
        "arguments": {"topic": "{last_user}"},
        "reply": "Here is what I found: {result}.",
    },
    {"match": ["broken"], "tool": "fail", "reply": "That did not work: {result}"},
]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ToolContext]] = []


def make_tools(recorder: Recorder) -> tuple[Any, Any]:
    @tool
    def research(topic: str, ctx: ToolContext) -> str:
        """Research a topic in the background."""
        recorder.calls.append((topic, ctx))
        return "panels got cheaper"

    @tool
    def fail() -> str:
        """Always fails."""
        raise ToolError("the archive is offline; try again later")

    return research, fail


# -- ChatContext -> messages ----------------------------------------------------------------


def test_history_becomes_chat_messages_in_the_openai_shape() -> None:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="developer", content="be brief")
    ctx.add_message(role="user", content="please research solar panels")
    ctx.add_message(role="assistant", content="Let me look into that.")
    ctx.insert(llm.FunctionCall(call_id="c1", name="research", arguments='{"topic": "x"}'))
    ctx.insert(llm.FunctionCall(call_id="c2", name="weather", arguments=""))
    ctx.insert(llm.FunctionCall(call_id="orphan", name="lost", arguments="{}"))
    ctx.insert(llm.FunctionCallOutput(call_id="c1", name="research", output="ok", is_error=False))
    ctx.insert(llm.FunctionCallOutput(call_id="c2", name="weather", output="sun", is_error=True))
    ctx.insert(llm.FunctionCallOutput(call_id="nope", name="ghost", output="?", is_error=False))
    ctx.insert(llm.AgentHandoff(old_agent_id="a", new_agent_id="b"))
    ctx.add_message(role="user", content=[llm.ImageContent(image="https://example.com/x.png")])

    messages = to_messages(ctx)

    assert messages == [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content="please research solar panels"),
        ChatMessage(
            role="assistant",
            content="Let me look into that.",
            tool_calls=(
                ToolCall(id="c1", name="research", arguments='{"topic": "x"}'),
                ToolCall(id="c2", name="weather", arguments="{}"),
            ),
        ),
        ChatMessage(role="tool", content="ok", tool_call_id="c1", name="research"),
        ChatMessage(role="tool", content="sun", tool_call_id="c2", name="weather"),
    ]


def test_a_call_after_tool_output_opens_a_new_assistant_message() -> None:
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="hi")
    for call_id in ("a", "b"):
        ctx.insert(llm.FunctionCall(call_id=call_id, name="t", arguments="{}"))
        ctx.insert(
            llm.FunctionCallOutput(call_id=call_id, name="t", output=call_id, is_error=False)
        )
    roles = [(m.role, len(m.tool_calls)) for m in to_messages(ctx)]
    assert roles == [("user", 0), ("assistant", 1), ("tool", 0), ("assistant", 1), ("tool", 0)]


def test_what_was_said_while_a_tool_ran_goes_before_its_call() -> None:
    # ask_user by voice: the questions are spoken (and added) while the tool still runs
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="it is broken")
    ctx.add_message(role="assistant", content="Let me check.")
    ctx.insert(llm.FunctionCall(call_id="q", name="ask_user", arguments="{}"))
    ctx.add_message(role="assistant", content="Restarted your router?")
    ctx.add_message(role="assistant", content="Which service?")
    ctx.insert(llm.FunctionCallOutput(call_id="q", name="ask_user", output="{}", is_error=False))

    assert to_messages(ctx) == [
        ChatMessage(role="user", content="it is broken"),
        ChatMessage(role="assistant", content="Let me check."),
        ChatMessage(role="assistant", content="Restarted your router?"),
        ChatMessage(role="assistant", content="Which service?"),
        ChatMessage(
            role="assistant", tool_calls=(ToolCall(id="q", name="ask_user", arguments="{}"),)
        ),
        ChatMessage(role="tool", content="{}", tool_call_id="q", name="ask_user"),
    ]


# -- tools and tool choice ------------------------------------------------------------------


def test_tool_specs_from_raw_and_decorated_livekit_tools() -> None:
    research, _ = make_tools(Recorder())

    @function_tool
    async def lookup(city: str) -> str:
        """Look up a city."""
        return city

    specs = to_tool_specs([livekit_tool(research, ToolContext()), lookup])
    assert [s.name for s in specs] == ["research", "lookup"]
    assert specs[0] == research.spec
    assert specs[1].description == "Look up a city."
    assert "city" in specs[1].parameters["properties"]


def test_tool_choice_conversion() -> None:
    assert to_tool_choice(NOT_GIVEN) == "auto"
    assert to_tool_choice("none") == "none"
    assert to_tool_choice({"type": "function", "function": {"name": "research"}}) == "research"


def test_later_tools_win_a_name_clash() -> None:
    first, _ = make_tools(Recorder())
    second, _ = make_tools(Recorder())
    converted = livekit_tools([first, second], ToolContext())
    assert len(converted) == 1
    assert converted[0].info.raw_schema["name"] == "research"


# -- streaming ------------------------------------------------------------------------------


async def test_stream_turns_text_and_tool_calls_into_chat_chunks() -> None:
    research, fail = make_tools(Recorder())
    adapter = LiveKitLLM(ScriptedLLM(RULES))
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="please research solar panels")
    tools = livekit_tools([research, fail], ToolContext())

    response = await adapter.chat(chat_ctx=ctx, tools=list(tools)).collect()

    assert response.text == "Let me look into that."
    [call] = response.tool_calls
    assert call.name == "research"
    assert json.loads(call.arguments) == {"topic": "please research solar panels"}
    assert adapter.model == "ScriptedLLM"
    assert adapter.provider == "voicehub"


async def test_tool_choice_none_reaches_the_model() -> None:
    adapter = LiveKitLLM(ScriptedLLM(RULES))
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="please research solar panels")
    response = await adapter.chat(chat_ctx=ctx, tool_choice="none").collect()
    assert response.text == "Let me look into that."
    assert response.tool_calls == []


async def test_model_errors_surface_from_the_stream() -> None:
    class Broken:
        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            yield TextDelta(text="partial ")
            raise RuntimeError("model backend is down")

    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(RuntimeError, match="model backend is down"):
        await LiveKitLLM(Broken()).chat(chat_ctx=ctx).collect()


async def test_tool_call_chunks_pass_through_unchanged() -> None:
    class Caller:
        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            yield ToolCallChunk(call=ToolCall(id="x1", name="t", arguments='{"a": 1}'))

    ctx = llm.ChatContext.empty()
    ctx.add_message(role="user", content="hi")
    response = await LiveKitLLM(Caller()).chat(chat_ctx=ctx).collect()
    assert [(c.call_id, c.name, c.arguments) for c in response.tool_calls] == [
        ("x1", "t", '{"a": 1}')
    ]


# -- a real livekit tool loop (text mode, no audio) -----------------------------------------


async def test_livekit_runs_our_tools_with_the_room_context() -> None:
    recorder = Recorder()
    research, fail = make_tools(recorder)
    context = ToolContext(room_id="call-1", agent_id="desk")
    agent = LKAgent(instructions="be brief", tools=list(livekit_tools([research, fail], context)))
    async with AgentSession(llm=LiveKitLLM(ScriptedLLM(RULES))) as session:
        await session.start(agent)
        result: RunResult[None] = await session.run(user_input="please research solar panels")
        result.expect.next_event().is_message(role="assistant")
        result.expect.next_event().is_function_call(name="research")
        result.expect.next_event().is_function_call_output(output="panels got cheaper")
        reply = result.expect.next_event().is_message(role="assistant").event().item
        assert reply.text_content == "Here is what I found: panels got cheaper."

        failed: RunResult[None] = await session.run(user_input="the thing is broken")
        output = failed.expect.contains_function_call_output().event().item
        assert output.is_error
        assert output.output == "error in tool fail: the archive is offline; try again later"
        last = failed.expect[-1].is_message(role="assistant").event().item
        assert last.text_content == f"That did not work: {output.output}"

    [(topic, ctx)] = recorder.calls
    assert topic == "please research solar panels"
    assert (ctx.room_id, ctx.agent_id) == ("call-1", "desk")
    assert ctx.call_id.startswith("call_")
