"""A scripted `VoiceSession` for server tests: the real transport, no models.

Caller audio is counted, not heard. `say` (and so `inject`) sends a little audio, a
transcript and a speech mark through the transport, and returns once the client acks the
mark, exactly like the real session. The stack keeps every session it built. With
`answer`, a session says that line once, when the caller's first words are over (loud
audio, then 0.3 s of silence), as a client waiting for its turn needs.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from voicehub.agents.agent import Agent
from voicehub.agents.tools import Tool
from voicehub.core.jobs import TaskSet
from voicehub.delivery.injector import InjectOutcome
from voicehub.desks.call_resume import CallResume
from voicehub.desks.desk import Desk
from voicehub.desks.voice_stack import CallSpec
from voicehub.hub import Hub
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.events import ServerEvent, Transcript
from voicehub.voice.transport import CallTransport

_ids = itertools.count(1)
_LOUD = 1000  # peak sample: synthesized words, not a line's silence
_QUIET_AFTER = 16000 * 2 * 3 // 10  # 0.3 s of 16 kHz PCM16 after the words end the turn


class ScriptedSession:
    """Implements `VoiceSession` and the delivery `Injector` on a real `CallTransport`."""

    def __init__(
        self,
        hub: Hub,
        room_id: str,
        desk: Desk,
        transport: CallTransport,
        greeting: str | None,
        answer: str | None = None,
    ) -> None:
        self.hub, self.room_id, self.desk, self.transport = hub, room_id, desk, transport
        self.greeting = greeting
        self.answer = answer
        self._quiet_bytes: int | None = None  # silence since the caller's words, once heard
        self.activity = VoiceActivity(hub.clock)
        self.caller_audio = bytearray()
        self.confirmed: list[str] = []
        self.said: list[str] = []
        self.texts: list[str] = []  # caller turns typed (keypad)
        self.closed = False
        self.closing = asyncio.Event()  # set by aclose: the server cleans up after the socket
        self.resume: CallResume | None = None  # how the call resumed another, if it did
        # events recorded but not sent yet (behind a slow store post): `flush` sends them
        self.unsent: list[ServerEvent] = []
        self._playing: dict[str, asyncio.Future[None]] = {}
        self._tasks = TaskSet("scripted session")

    async def start(self) -> None:
        self.activity.session_attached()
        await self.hub.delivery.attach(self.room_id, self, self.activity)
        if self.greeting:
            self._tasks.start(self.say(self.greeting), name="greeting")

    async def push_audio(self, pcm16: bytes) -> None:
        self.caller_audio += pcm16
        if self.answer is None:
            return
        loud = bool(pcm16) and int(np.abs(np.frombuffer(pcm16, "<i2")).max()) >= _LOUD
        if loud:
            self._quiet_bytes = 0
        elif self._quiet_bytes is not None:
            self._quiet_bytes += len(pcm16)
            if self._quiet_bytes >= _QUIET_AFTER:
                answer, self.answer = self.answer, None
                self._tasks.start(self.say(answer), name="answer")

    async def push_text(self, text: str) -> None:
        self.texts.append(text)

    def playout_confirmed(self, speech_id: str) -> None:
        self.confirmed.append(speech_id)
        self.activity.playout_confirmed(speech_id)
        playing = self._playing.pop(speech_id, None)
        if playing is not None and not playing.done():
            playing.set_result(None)

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        speech_id = f"fake-{next(_ids)}"
        playing = asyncio.get_running_loop().create_future()
        self._playing[speech_id] = playing
        self.said.append(text)
        self.activity.agent_speech_started(speech_id)
        await self.transport.send_audio(bytes(640 * 5))  # 100 ms of silence stands for speech
        await self.transport.send_event(Transcript(role="assistant", text=text, final=True))
        await self.transport.mark(speech_id)
        self.activity.agent_speech_finished(speech_id, interrupted=False)
        try:
            await playing
        except asyncio.CancelledError:
            self.activity.agent_speech_finished(speech_id, interrupted=True)
            raise
        return InjectOutcome.FINISHED

    async def generate_reply(self, instructions: str) -> InjectOutcome:
        return await self.say(instructions)

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        return await self.say(text)

    async def interrupt(self) -> None:
        return None

    async def update_agent(self, agent: Agent, *, extra_tools: list[Tool] | None = None) -> None:
        return None

    async def flush(self) -> None:
        while self.unsent:
            await self.transport.send_event(self.unsent.pop(0))

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.closing.set()
        await self.hub.delivery.detach(self.room_id)
        self._tasks.cancel()
        for playing in self._playing.values():
            playing.cancel()
        self.activity.session_detached()


class ScriptedStack:
    """A `VoiceStack` serving every desk with `ScriptedSession`s; `sessions` lists them in
    order."""

    def __init__(self, *, answer: str | None = None) -> None:
        self.sessions: list[ScriptedSession] = []
        self.prepared: list[str] = []
        self.answer = answer

    def check(self, desk: Desk) -> list[str]:
        return []

    async def prepare(self, desks: Sequence[Desk]) -> None:
        self.prepared = [desk.name for desk in desks]

    async def start(self, call: CallSpec) -> ScriptedSession:
        """Like the real stacks: the room with the desk's call orchestration, greeting a
        new conversation only."""
        hub, desk = call.hub, call.desk
        await hub.create_room(call.room_id, orchestration=desk.call_orchestration())
        session = ScriptedSession(
            hub, call.room_id, desk, call.transport, call.greeting, self.answer
        )
        session.resume = call.resume
        self.sessions.append(session)
        await session.start()
        return session

    async def aclose(self) -> None:
        return None
