"""Where a call's audio is tapped: around its transport (what the agent sends the caller,
and the events) and around its session (what the caller sends), at the composition
level, so every engine behind the `VoiceSession` seam is recorded alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.agents.tools import Tool
    from voicehub.delivery.injector import InjectOutcome
    from voicehub.recordings.tape import CallTape
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.events import ServerEvent
    from voicehub.voice.session import VoiceSession
    from voicehub.voice.transport import CallTransport

__all__ = ["RecordedSession", "RecordedTransport"]


class RecordedTransport:
    """A `CallTransport` that lays the agent's audio and the call's events on a tape."""

    def __init__(self, inner: CallTransport, tape: CallTape) -> None:
        self.inner = inner
        self.tape = tape

    @property
    def sample_rate(self) -> int:
        return self.inner.sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        self.tape.agent_audio(pcm16)
        await self.inner.send_audio(pcm16)

    async def mark(self, speech_id: str) -> None:
        await self.inner.mark(speech_id)

    async def clear(self) -> None:
        self.tape.agent_cleared()
        await self.inner.clear()

    async def send_event(self, event: ServerEvent) -> None:
        self.tape.event(event)
        await self.inner.send_event(event)

    def __getattr__(self, name: str) -> Any:
        # the transport's own extras (the switchboard's `send_event_nowait`, `close`)
        return getattr(self.inner, name)


class RecordedSession:
    """A `VoiceSession` that lays the caller's audio (and typed turns) on a tape."""

    def __init__(self, inner: VoiceSession, tape: CallTape) -> None:
        self.inner = inner
        self.tape = tape
        self.room_id: str = inner.room_id
        self.activity: VoiceActivity = inner.activity

    async def start(self) -> None:
        await self.inner.start()

    async def push_audio(self, pcm16: bytes) -> None:
        self.tape.caller_audio(pcm16)
        await self.inner.push_audio(pcm16)

    async def push_text(self, text: str) -> None:
        self.tape.caller_typed(text)
        await self.inner.push_text(text)

    def playout_confirmed(self, speech_id: str) -> None:
        self.inner.playout_confirmed(speech_id)

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        return await self.inner.say(text, allow_interrupt=allow_interrupt)

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        return await self.inner.generate_reply(instructions)

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        return await self.inner.inject(text, allow_interrupt=allow_interrupt, metadata=metadata)

    async def interrupt(self) -> None:
        await self.inner.interrupt()

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        await self.inner.update_agent(agent, extra_tools=extra_tools)

    async def flush(self) -> None:
        await self.inner.flush()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # the engine's own extras (a realtime session's `running`, ...)
        return getattr(self.inner, name)
