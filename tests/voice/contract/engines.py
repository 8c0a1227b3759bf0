"""The two voice engines behind one harness, for the contract suite.

Each harness starts a session of its engine on an in-memory transport, in a hub on a
virtual clock, with the same desk agent: asked about "solar" it says "Let me look into
that.", calls `research`, and answers "Here is what I found: <result>."; told a result
("result now: X", or a result item) it says "News: X". The pipeline engine runs it as a
scripted agent on the offline stack (Silero, PocketSphinx, Piper); the realtime engine as
the fake Realtime server's brain, through the real `openai` SDK.

Time: the pipeline engine decides turns on the hub's clock, so its harness moves the
virtual clock 20 ms per caller frame and while a test waits (`until`); the realtime model's
turns are the fake server's, in real time, and its harness leaves the clock alone unless a
test moves it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from openai import AsyncOpenAI

from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext, tool
from voicehub.core.clock import VirtualClock, settle
from voicehub.hub import Hub
from voicehub.testing import AckMode, MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.session import EngineOptions
from voicehub.voice.engine.turn_engine import TurnEngineSettings
from voicehub.voice.providers.offline import PiperTTS, PocketSphinxSTT, load_vad
from voicehub.voice.realtime.config import RealtimeSettings
from voicehub.voice.realtime_session import (
    SAY_INSTRUCTIONS,
    RealtimeCallOptions,
    RealtimeVoiceSession,
)
from voicehub_dev.fakes.openai_realtime import Call, FakeRealtimeServer, Say, Turn
from voicehub_dev.fakes.voice_providers import pipeline_session

RATE = 16000
FRAME = frame_bytes(RATE)
ROOM = "call-1"
TICK = 0.02
FOUND = "panels got cheaper"
LONG = (
    "Here is a long answer about the weather in several cities. It will be sunny in Paris, "
    "cloudy in London, and rainy in Berlin for most of the coming week."
)


@functools.cache
def caller_speech() -> bytes:
    return spoken("please research solar panels", rate=RATE)


_CALL_OPTIONS = ("delivery_mode", "answer_timeout", "backoff")  # RealtimeCallOptions


class Research:
    """The desk's tool, recording its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ToolContext]] = []

    def tool(self) -> Tool:
        @tool
        def research(topic: str, ctx: ToolContext) -> str:
            """Research a topic in the background."""
            self.calls.append((topic, ctx))
            return FOUND

        return research


class Harness:
    """What every engine's harness offers the contract tests."""

    name = ""
    moves_time = False

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.clock: VirtualClock = hub.clock  # type: ignore[assignment]
        self.research = Research()
        self.sessions: list[Any] = []

    def agent(self, **fields: Any) -> Agent:
        raise NotImplementedError

    async def start(
        self, agent: Agent | None = None, *, ack: AckMode = "manual", **options: Any
    ) -> tuple[Any, MemoryTransport]:
        raise NotImplementedError

    async def speak(self, session: Any, pcm16: bytes, silence: float = 0.8) -> None:
        """The caller says `pcm16`, then stays silent (20 ms frames, faster than real time;
        the virtual clock follows the audio when the engine decides turns on it)."""
        audio = pcm16 + bytes(2 * int(RATE * silence))
        for start in range(0, len(audio), FRAME):
            await session.push_audio(audio[start : start + FRAME])
            if self.moves_time:
                await settle()
                await self.clock.advance(TICK)

    async def until(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait until `predicate()` holds; time passes meanwhile where the engine needs it."""
        clock = self.clock if self.moves_time else None
        await until(predicate, timeout=timeout, poll=0.005, clock=clock, step=TICK)

    async def aclose(self) -> None:
        for session in self.sessions:
            await session.aclose()


# -- the pipeline engine ---------------------------------------------------------------------


@functools.cache
def offline_models() -> dict[str, Any]:
    stt = PocketSphinxSTT()
    stt.prewarm()
    tts = PiperTTS(sample_rate=22050)
    tts.prewarm()
    return {"stt": stt, "tts": tts, "vad": load_vad("silero"), "robot": PiperTTS(sample_rate=RATE)}


def desk_rules() -> list[dict[str, Any]]:
    return [
        {
            "match": ["solar"],
            "say": "Let me look into that.",
            "tool": "research",
            "arguments": {"topic": "solar panels"},
            "reply": "Here is what I found: {result}.",
        },
        {"regex": r"result now: (?P<result>.+)", "on": "instruction", "say": "News: {result}"},
        {"match": ["transfer"], "tool": "research", "arguments": {"topic": "transfer"}},
    ]


class PipelineHarness(Harness):
    name = "pipeline"
    moves_time = True

    def agent(self, **fields: Any) -> Agent:
        base: dict[str, Any] = {
            "id": "desk",
            "instructions": "You are the research desk.",
            "llm": ScriptedLLM(desk_rules(), instruction_fallback="{message}"),
            "tools": (self.research.tool(),),
        }
        return Agent(**{**base, **fields})

    async def start(
        self, agent: Agent | None = None, *, ack: AckMode = "manual", **options: Any
    ) -> tuple[Any, MemoryTransport]:
        models = offline_models()
        transport = MemoryTransport(RATE, ack=ack, clock=self.clock)
        mode = options.pop("delivery_mode", "say")
        session = pipeline_session(
            self.hub,
            ROOM,
            agent or self.agent(),
            transport,
            stt=models["stt"],
            tts=models["tts"],
            vad=models["vad"],
            voices={"robot": models["robot"]},
            # the recognizer answers in real time while this clock runs ahead of it: the
            # turn waits for its final, as it does on a live call (final_timeout is for a
            # recognizer that never finalizes, tested on the turn engine alone)
            options=EngineOptions(delivery_mode=mode, turn=TurnEngineSettings(final_timeout=60.0)),
            **options,
        )
        transport.session = session
        self.sessions.append(session)
        await session.start()
        return session, transport


# -- the realtime engine ---------------------------------------------------------------------


def brain(turn: Turn) -> list[Say | Call]:
    """The fake model, as the pipeline's scripted desk agent behaves."""
    last = turn.last
    said = SAY_INSTRUCTIONS.split("{text}")[0]
    if turn.instructions.startswith(said):
        return [Say(turn.instructions[len(said) :])]
    if last.get("type") == "function_call_output":
        return [Say(f"Here is what I found: {last['output']}.")]
    if last.get("role") == "system":
        return [Say("News: " + turn.last_text().removeprefix("Background result: "))]
    text = turn.last_text()
    if last.get("role") == "user" and "solar" in text and "research" in turn.tools:
        return [Say("Let me look into that."), Call("research", {"topic": "solar panels"})]
    if last.get("role") == "user" and "transfer" in text and "research" in turn.tools:
        return [Call("research", {"topic": "transfer"})]
    if last.get("role") == "user":
        return [Say("Hello, how can I help?")]
    return [Say(turn.instructions or "Okay.")]


class RealtimeHarness(Harness):
    name = "realtime"

    def __init__(self, hub: Hub, server: FakeRealtimeServer) -> None:
        super().__init__(hub)
        self.server = server
        self.client = AsyncOpenAI(api_key="test-key", base_url=server.base_url)

    def agent(self, **fields: Any) -> Agent:
        base: dict[str, Any] = {
            "id": "desk",
            "instructions": "You are the research desk.",
            "tools": (self.research.tool(),),
        }
        fields.pop("llm", None)
        if fields.get("voice") == "robot":
            fields["voice"] = "cedar"
        return Agent(**{**base, **fields})

    async def start(
        self, agent: Agent | None = None, *, ack: AckMode = "manual", **options: Any
    ) -> tuple[Any, MemoryTransport]:
        transport = MemoryTransport(RATE, ack=ack, clock=self.clock)
        settings = RealtimeSettings(silence_ms=300, transcription_model="gpt-4o-mini-transcribe")
        session = RealtimeVoiceSession(
            self.hub,
            ROOM,
            agent or self.agent(),
            transport,
            client=self.client,
            settings=settings,
            options=RealtimeCallOptions(
                mark_every_ms=100,
                **{key: options.pop(key) for key in _CALL_OPTIONS if key in options},
            ),
            **options,
        )
        transport.session = session
        self.sessions.append(session)
        await session.start()
        return session, transport
