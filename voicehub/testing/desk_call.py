"""One call to a desk in a test: `call_desk`.

    async with call_desk("channels/research.toml") as call:
        await call.caller_types("could you research heat pumps")
        assert "analysts" in await call.agent_said("analysts")

The desk runs as the server runs it (its voice stack, its agents, tools and delivery) on a
hub of its own with an in-memory store, over a `MemoryTransport` that confirms playout at
once. The caller types turns (`caller_types`: no recognizer in the way, as a phone keypad's
text) or speaks them (`caller_says`: PCM16 at the call's rate, your own recording, pushed
faster than real time). What the agents said comes back as the transcripts the caller's
client receives (`agent_lines`, `agent_said`); every wait is on those events, bounded by a
timeout, never a sleep.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_file
from voicehub.desks.voice_stack import CallSpec, VoiceStack, default_voice_stacks
from voicehub.testing.transport import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.events import Transcript

if TYPE_CHECKING:
    from voicehub.hub import Hub
    from voicehub.voice.session import VoiceSession

__all__ = ["DeskCall", "call_desk"]


class DeskCall:
    """A desk on one call in a test (see the module): its `hub`, `session` and
    `transport`."""

    def __init__(self, hub: Hub, desk: Desk, session: VoiceSession, transport: MemoryTransport):
        self.hub, self.desk, self.session, self.transport = hub, desk, session, transport

    @property
    def room_id(self) -> str:
        return self.session.room_id

    async def caller_types(self, text: str) -> None:
        """A caller turn as text: answered like a spoken one."""
        await self.session.push_text(text)

    async def caller_says(self, pcm16: bytes, *, silence: float = 0.8) -> None:
        """A spoken caller turn: `pcm16` (mono, at the call's rate), then `silence`
        seconds of quiet that end the turn, in 20 ms frames as fast as the session takes
        them."""
        rate = self.transport.sample_rate
        audio = pcm16 + bytes(-len(pcm16) % 2) + bytes(2 * int(rate * silence))
        frame = frame_bytes(rate)
        for start in range(0, len(audio), frame):
            await self.session.push_audio(audio[start : start + frame].ljust(frame, b"\0"))

    def agent_lines(self) -> list[str]:
        """What the agents said so far, in order."""
        return [
            event.text
            for event in self.transport.events_of(Transcript)
            if event.role == "assistant" and event.final
        ]

    async def agent_said(self, words: str, timeout: float = 30.0) -> str:
        """Wait until an agent line contains `words` (case-insensitive); return the line.
        TimeoutError after `timeout` seconds, listing what was said."""
        wanted = words.lower()

        def found() -> str | None:
            return next((line for line in self.agent_lines() if wanted in line.lower()), None)

        try:
            await self.transport.wait_for(lambda: found() is not None, timeout)
        except TimeoutError:
            said = "; ".join(self.agent_lines()) or "nothing"
            message = f"no agent line with {words!r} in {timeout} s (said: {said})"
            raise TimeoutError(message) from None
        line = found()
        assert line is not None
        return line


@contextlib.asynccontextmanager
async def call_desk(
    desk: Desk | str | Path,
    *,
    hub: Hub | None = None,
    voice: VoiceStack | None = None,
    conversation: str = "test",
    sample_rate: int = 16000,
) -> AsyncIterator[DeskCall]:
    """Run `desk` (a built desk, or the path of its desk file) on one call, closed at the
    end of the block. `hub` defaults to a fresh one with an in-memory store (closed with
    the call); `voice` to the registered voice stacks (the embedded models are loaded once
    per test process)."""
    built = desk if isinstance(desk, Desk) else build_desk(load_desk_file(Path(desk)))
    stacks = voice if voice is not None else _default_stacks()
    await stacks.prepare([built])
    async with contextlib.AsyncExitStack() as stack:
        if hub is None:
            hub = built.make_hub()
            await stack.enter_async_context(hub)
        transport = MemoryTransport(sample_rate)
        stack.push_async_callback(transport.aclose)
        call = await CallSpec.for_room(hub, built, f"{built.name}:{conversation}", transport)
        session = await stacks.start(call)
        stack.push_async_callback(session.aclose)
        transport.session = session
        yield DeskCall(hub, built, session, transport)


@functools.cache
def _default_stacks() -> VoiceStack:
    return default_voice_stacks()
