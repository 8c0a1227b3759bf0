"""One reply of the agent on a call, run through voicehub's agent runner.

A `Reply` answers a committed caller turn (or the driver's instructions: a greeting after a
handoff, a result worded by the model). `ReplyRun.run` calls `run_agent` with the agent
on the call, its tools and the call's history. The model's text streams into a
`SentenceSplitter`, and each step's sentences become one `Speech` played as soon as its
first sentence is synthesized, while the model goes on and the step's tools run. Every
step's message and tool result goes into the history as it happens, so a reply stopped
half-way leaves a history the model can read.

A reply whose tools run is never cancelled (a tool that waits for the caller's answer, or
dispatched work, must finish); `stop()` then ends it after its tools, without another step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.agents.llm import (
    ChatMessage,
    LLMChunk,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from voicehub.agents.runner import run_agent
from voicehub.agents.tools import ToolContext, ToolResult
from voicehub.voice.engine.sentences import SentenceSplitter
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.engine.tts_audio import synthesized_pcm
from voicehub.voice.engine.turn_engine import AgentSpeech

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.llm import LLM
    from voicehub.agents.tools import Tool
    from voicehub.voice.engine.history import CallHistory

__all__ = ["Reply", "ReplyHost", "ReplyRun", "current_reply"]

_CURRENT: ContextVar[Reply | None] = ContextVar("voicehub_reply", default=None)


def current_reply() -> Reply | None:
    """The reply whose tools are running in this task (None outside a reply)."""
    return _CURRENT.get()


class _Stopped(Exception):
    """Raised before a reply's next step when it was stopped."""


@dataclass(eq=False)
class Reply:
    """A reply: to caller turn `turn` (its text `text`), or to `instructions`."""

    turn: int | None
    text: str
    instructions: str | None = None
    kind: AgentSpeech = "reply"
    interruptible: bool = True
    agent_id: str = ""  # the agent answering (set when the reply starts)
    # prepared before its turn committed: set at the commit; its tools wait for it
    committed: asyncio.Event | None = None
    task: asyncio.Task[None] | None = None
    speeches: list[Speech] = field(default_factory=list)
    in_tools: bool = False
    used_tools: bool = False
    stopped: bool = False
    heard: bool = False
    started_at: float = 0.0
    first_token_at: float | None = None
    first_sentence_at: float | None = None
    first_audio_at: float | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def stop(self) -> None:
        """End the reply: at once, or after its running tools (never cut a tool)."""
        self.stopped = True
        if self.task is not None and not self.in_tools and not self.task.done():
            self.task.cancel()

    @property
    def outcome(self) -> SpeechEnd:
        """How its speech ended: interrupted if any step was cut (or none was heard because
        it was stopped), held if a result's first frame was held, else played."""
        ends = [s.end for s in self.speeches]
        if SpeechEnd.HELD in ends:
            return SpeechEnd.HELD
        if SpeechEnd.INTERRUPTED in ends or (self.stopped and not self.heard):
            return SpeechEnd.INTERRUPTED
        if SpeechEnd.FAILED in ends:
            return SpeechEnd.FAILED
        return SpeechEnd.PLAYED


class ReplyHost(Protocol):
    """What a reply needs of its session (the session implements it)."""

    room_id: str
    history: CallHistory

    @property
    def sample_rate(self) -> int: ...

    def reply_agent(self) -> tuple[Agent, Sequence[Tool], ToolContext, Any]:
        """The agent on the call, its extra tools, the tool context and its TTS."""
        ...

    def new_speech_id(self) -> str: ...

    def play(self, speech: Speech) -> None: ...

    def tools_running(self, reply: Reply, running: bool) -> None: ...

    def tool_ran(self, reply: Reply, call: ToolCall, result: ToolResult) -> None: ...

    def now(self) -> float: ...


class ReplyRun:
    """Runs `reply` on `host` (see the module docstring)."""

    def __init__(self, host: ReplyHost, reply: Reply) -> None:
        self.host, self.reply = host, reply
        self._step: _StepSpeech | None = None

    async def run(self) -> None:
        host, reply = self.host, self.reply
        token = _CURRENT.set(reply)
        reply.started_at = host.now()
        agent, extra_tools, context, voice = host.reply_agent()
        assert agent.llm is not None
        reply.agent_id = agent.id
        observed = _ObservedLLM(agent.llm, self._on_chunk, self._on_step_end, reply.committed)
        messages = host.history.messages()
        if reply.committed is not None and not reply.committed.is_set():
            messages.append(ChatMessage(role="user", content=reply.text))  # not yet in history
        if reply.instructions is not None:
            messages.append(ChatMessage(role="system", content=reply.instructions))
        self._voice = voice
        try:
            await run_agent(
                agent.model_copy(update={"llm": observed}),
                messages,
                context=context,
                extra_tools=extra_tools,
                prepare_step=self._prepare_step,
                on_tool_result=self._on_tool_result,
            )
        except _Stopped:
            pass
        finally:
            _CURRENT.reset(token)
            if self._step is not None:
                self._step.end()

    # -- steps ---------------------------------------------------------------------------

    def _prepare_step(self, step: int, messages: list[ChatMessage]) -> list[ChatMessage]:
        if step > 1:
            self._end_tools()
            if self.reply.stopped:
                raise _Stopped
        return messages

    def _on_chunk(self, chunk: LLMChunk) -> None:
        reply = self.reply
        if reply.first_token_at is None:
            reply.first_token_at = self.host.now()
        if isinstance(chunk, TextDelta) and chunk.text:
            if self._step is None:
                self._step = _StepSpeech(self)
            self._step.push(chunk.text)

    def _on_step_end(self, text: str, calls: list[ToolCall]) -> None:
        self.host.history.add(ChatMessage(role="assistant", content=text, tool_calls=tuple(calls)))
        if self._step is not None:
            self._step.end()
            self._step = None
        if calls:
            self.reply.in_tools = self.reply.used_tools = True
            self.host.tools_running(self.reply, True)

    async def _on_tool_result(self, call: ToolCall, result: ToolResult) -> None:
        message = ChatMessage(
            role="tool", content=result.content, tool_call_id=call.id, name=call.name
        )
        self.host.history.add(message)
        self.host.tool_ran(self.reply, call, result)

    def _end_tools(self) -> None:
        if self.reply.in_tools:
            self.reply.in_tools = False
            self.host.tools_running(self.reply, False)


class _StepSpeech:
    """The speech of one model step: sentences go to the TTS as they complete."""

    def __init__(self, run: ReplyRun) -> None:
        self._run = run
        reply, host = run.reply, run.host
        self._splitter = SentenceSplitter()
        self._sentences: asyncio.Queue[str | None] = asyncio.Queue()
        self._words: list[str] = []
        audio = synthesized_pcm(
            run._voice, self._texts(), host.sample_rate, first_audio=self._first_audio
        )
        self.speech = Speech(
            host.new_speech_id(),
            reply.kind,
            "",
            audio,
            interruptible=reply.interruptible,
            agent_id=reply.agent_id,
        )
        reply.speeches.append(self.speech)
        host.play(self.speech)

    def push(self, delta: str) -> None:
        self._words.append(delta)
        self.speech.text = "".join(self._words).strip()
        for sentence in self._splitter.push(delta):
            self._sentence(sentence)

    def end(self) -> None:
        rest = self._splitter.flush()
        if rest:
            self._sentence(rest)
        self._sentences.put_nowait(None)

    def _sentence(self, text: str) -> None:
        reply = self._run.reply
        if reply.first_sentence_at is None:
            reply.first_sentence_at = self._run.host.now()
        self._sentences.put_nowait(text)

    def _first_audio(self) -> None:
        reply = self._run.reply
        if reply.first_audio_at is None:
            reply.first_audio_at = self._run.host.now()

    async def _texts(self) -> AsyncIterator[str]:
        while (text := await self._sentences.get()) is not None:
            yield text


class _ObservedLLM:
    """The agent's model, with its chunks seen as they stream and each step's end."""

    def __init__(
        self,
        model: LLM,
        on_chunk: Callable[[LLMChunk], None],
        on_step_end: Callable[[str, list[ToolCall]], None],
        committed: asyncio.Event | None = None,
    ) -> None:
        self._model, self._on_chunk, self._on_step_end = model, on_chunk, on_step_end
        self._committed = committed  # a prepared reply's tools wait until its turn commits

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        parts: list[str] = []
        calls: list[ToolCall] = []
        async for chunk in self._model.stream(messages, tools, tool_choice=tool_choice):
            if isinstance(chunk, ToolCallChunk) and self._committed is not None:
                await self._committed.wait()  # nothing is done for a turn not yet over
            self._on_chunk(chunk)
            if isinstance(chunk, TextDelta):
                parts.append(chunk.text)
            elif isinstance(chunk, ToolCallChunk):
                calls.append(chunk.call)
            yield chunk
        self._on_step_end("".join(parts), calls)
