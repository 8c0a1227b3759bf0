"""The tool loop: final answers, stop tools, step limits, prepare_step, unknown tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from voicehub.agents.runner import StopReason, run_agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext
from voicehub.errors import ConfigError


class AlwaysCalls:
    """A model that calls `tool` on every turn and records what it was shown."""

    def __init__(self, tool: str = "tick", arguments: str = "{}") -> None:
        self.tool = tool
        self.arguments = arguments
        self.seen: list[list[ChatMessage]] = []

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        self.seen.append(list(messages))
        n = len(self.seen)
        yield TextDelta(text=f"step {n}")
        yield ToolCallChunk(call=ToolCall(id=f"c{n}", name=self.tool, arguments=self.arguments))


def tick() -> str:
    """Count one."""
    return "tock"


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def test_final_answer() -> None:
    agent = Agent(
        id="a", instructions="Be brief.", llm=ScriptedLLM([{"match": ["*"], "say": "Done."}])
    )
    result = await run_agent(agent, [user("go")])
    assert result.text == "Done."
    assert result.stop_reason is StopReason.FINAL_ANSWER
    assert result.steps == 1
    assert result.tool_calls == []
    assert [(m.role, m.content) for m in result.messages] == [
        ("system", "Be brief."),
        ("user", "go"),
        ("assistant", "Done."),
    ]


async def test_tool_result_feeds_the_next_step() -> None:
    llm = ScriptedLLM([{"match": ["count"], "tool": "tick", "reply": "It said {result}."}])
    agent = Agent(id="a", llm=llm, tools=(Tool(tick),))
    result = await run_agent(agent, [user("count please")])
    assert result.text == "It said tock."
    assert result.stop_reason is StopReason.FINAL_ANSWER
    assert result.steps == 2
    ((call, outcome),) = result.tool_calls
    assert (call.name, outcome.content, outcome.is_error) == ("tick", "tock", False)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[2].tool_call_id == call.id


async def test_stop_tool_stops_the_run() -> None:
    def finish(summary: str) -> str:
        """Hand in the final summary."""
        return f"saved: {summary}"

    llm = AlwaysCalls("finish", '{"summary": "all good"}')
    agent = Agent(id="a", llm=llm, tools=(Tool(finish),))
    result = await run_agent(agent, [user("work")], stop_tools=["finish"])
    assert result.stop_reason is StopReason.STOP_TOOL
    assert result.steps == 1
    assert len(llm.seen) == 1
    assert result.stop_call is not None
    assert result.stop_call[1].content == "saved: all good"
    assert result.text == "step 1"


async def test_a_stop_tool_called_with_bad_arguments_lets_the_model_retry() -> None:
    def finish(summary: str) -> str:
        return summary

    class FixesItself(AlwaysCalls):
        async def stream(
            self,
            messages: Sequence[ChatMessage],
            tools: Sequence[ToolSpec] = (),
            *,
            tool_choice: ToolChoice = "auto",
        ) -> AsyncIterator[LLMChunk]:
            self.arguments = "{}" if not self.seen else '{"summary": "fixed"}'
            async for chunk in super().stream(messages, tools, tool_choice=tool_choice):
                yield chunk

    llm = FixesItself("finish")
    agent = Agent(id="a", llm=llm, tools=(Tool(finish),))
    result = await run_agent(agent, [user("work")], stop_tools=["finish"])
    assert result.stop_reason is StopReason.STOP_TOOL
    assert result.steps == 2
    assert result.tool_calls[0][1].is_error
    assert "summary" in llm.seen[1][-1].content  # the model saw what was wrong
    assert result.stop_call is not None
    assert result.stop_call[1].content == "fixed"


async def test_default_step_limit_is_30() -> None:
    llm = AlwaysCalls()
    agent = Agent(id="a", llm=llm, tools=(Tool(tick),))
    assert agent.max_steps == 30
    result = await run_agent(agent, [user("loop forever")])
    assert result.stop_reason is StopReason.STEP_LIMIT
    assert result.steps == 30
    assert len(llm.seen) == 30
    assert len(result.tool_calls) == 30
    assert result.text == "step 30"


async def test_custom_step_limit() -> None:
    llm = AlwaysCalls()
    agent = Agent(id="a", llm=llm, tools=(Tool(tick),), max_steps=5)
    assert (await run_agent(agent, [user("x")])).steps == 5
    llm2 = AlwaysCalls()
    result = await run_agent(agent.model_copy(update={"llm": llm2}), [user("x")], max_steps=3)
    assert (result.stop_reason, result.steps, len(llm2.seen)) == (StopReason.STEP_LIMIT, 3, 3)


async def test_step_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        Agent(id="a", max_steps=0)


async def test_prepare_step_injects_a_message_the_history_does_not_keep() -> None:
    llm = AlwaysCalls()
    agent = Agent(id="a", llm=llm, tools=(Tool(tick),), max_steps=2)
    steps: list[int] = []

    async def prepare(step: int, messages: list[ChatMessage]) -> list[ChatMessage]:
        steps.append(step)
        return [*messages, ChatMessage(role="system", content=f"blackboard at step {step}")]

    result = await run_agent(agent, [user("go")], prepare_step=prepare)
    assert steps == [1, 2]
    assert llm.seen[0][-1].content == "blackboard at step 1"
    assert llm.seen[1][-1].content == "blackboard at step 2"
    # The second step's view holds the real history, not the first step's injection.
    assert "blackboard at step 1" not in [m.content for m in llm.seen[1]]
    assert all("blackboard" not in m.content for m in result.messages)


async def test_prepare_step_may_be_synchronous() -> None:
    llm = ScriptedLLM(
        [{"on": "instruction", "match": ["secret"], "say": "I saw the secret."}], fallback="no"
    )

    def prepare(step: int, messages: list[ChatMessage]) -> list[ChatMessage]:
        return [*messages, ChatMessage(role="system", content="the secret is 42")]

    result = await run_agent(Agent(id="a", llm=llm), [user("hi")], prepare_step=prepare)
    assert result.text == "I saw the secret."


async def test_unknown_tool_becomes_an_error_result_and_the_loop_continues() -> None:
    class CallsAGhostOnce(AlwaysCalls):
        async def stream(
            self,
            messages: Sequence[ChatMessage],
            tools: Sequence[ToolSpec] = (),
            *,
            tool_choice: ToolChoice = "auto",
        ) -> AsyncIterator[LLMChunk]:
            self.seen.append(list(messages))
            if len(self.seen) == 1:
                yield ToolCallChunk(call=ToolCall(id="c1", name="ghost"))
            else:
                yield TextDelta(text="recovered")

    llm = CallsAGhostOnce()
    agent = Agent(id="a", llm=llm, tools=(Tool(tick),))
    result = await run_agent(agent, [user("go")])
    assert result.stop_reason is StopReason.FINAL_ANSWER
    assert result.text == "recovered"
    ((call, outcome),) = result.tool_calls
    assert call.name == "ghost"
    assert outcome.is_error
    assert "unknown tool 'ghost'" in outcome.content
    assert "tick" in outcome.content
    assert llm.seen[1][-1].role == "tool"
    assert llm.seen[1][-1].content == outcome.content


async def test_tools_get_a_context_with_their_call_id() -> None:
    contexts: list[ToolContext] = []

    def where(context: ToolContext) -> str:
        contexts.append(context)
        return "here"

    llm = ScriptedLLM([{"match": ["*"], "tool": "where"}])
    agent = Agent(id="a", llm=llm)
    base = ToolContext(room_id="r1", agent_id="a", state={"k": 1})
    result = await run_agent(agent, [user("x")], context=base, extra_tools=[Tool(where)])
    ((call, _),) = result.tool_calls
    assert [(c.room_id, c.agent_id, c.call_id, c.state) for c in contexts] == [
        ("r1", "a", call.id, {"k": 1})
    ]


async def test_on_tool_result_observes_each_call() -> None:
    seen: list[str] = []

    async def observe(call: ToolCall, result: object) -> None:
        seen.append(call.name)

    agent = Agent(id="a", llm=AlwaysCalls(), tools=(Tool(tick),), max_steps=3)
    await run_agent(agent, [user("x")], on_tool_result=observe)
    assert seen == ["tick", "tick", "tick"]


async def test_an_agent_without_llm_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'a' has no llm"):
        await run_agent(Agent(id="a"), [user("x")])
