"""Asking the caller a question on a live call (`ask_user` by voice).

`VoiceAsker` is a `TextAsker` whose `present` speaks the question through the call's voice
session. The answer is the caller's next completed turn: the session does not reply to it
(its `reply_gate` is closed while a question is open, see `reply_gate`) and posts it to the
room as the caller's transcript, where the `TextAsker` hook takes it. Answers are read as in
a text room (`voicehub.orchestration.answers`): yes/no variants, option labels matched
loosely, and a reply that matches nothing is asked again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import VoicehubError
from voicehub.orchestration.ask_user import TextAsker

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.core.room import Room
    from voicehub.hub import Hub

__all__ = ["SpeakingSession", "VoiceAsker"]

log = logging.getLogger("voicehub.voice")


class SpeakingSession(Protocol):
    """What `VoiceAsker` needs of a voice session: the agent on the call, and `say`."""

    @property
    def agent(self) -> Agent: ...

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome: ...


class VoiceAsker(TextAsker):
    """Asks on a call: speaks each question through the call's session (`attach`) and
    records it in the room as the speaking agent's message, marked `ask_user`
    and `spoken`. Waits `timeout` seconds (hub clock) for the answer; None waits for ever.

    The caller may answer while the question is still being spoken (barge-in): the answer
    counts all the same.
    """

    def __init__(self, hub: Hub, *, timeout: float | None = 60.0) -> None:
        super().__init__(hub, timeout=timeout)
        self.session: SpeakingSession | None = None

    def attach(self, session: SpeakingSession) -> None:
        """Speak the questions through `session`, the call's, once it exists."""
        self.session = session

    def reply_gate(self, room_id: str) -> Callable[[], bool]:
        """The session's `reply_gate` for `room_id`: closed while a question is open there,
        so the agent does not answer the turn that answers it."""
        return lambda: not self.waiting(room_id)

    async def present(self, room: Room, text: str) -> Event | None:
        """Record the question, then speak it; None (nobody heard it) without a live session."""
        session = self.session
        if session is None:
            return None
        record = Event(
            kind=EventKind.MESSAGE,
            text=text,
            source=session.agent.id,
            role="assistant",
            source_type=ChannelType.AGENT,  # from an agent: nothing routes or answers it
            metadata={"ask_user": True, "spoken": True},
        )
        question = await room.post(record)
        if question is None:
            return None  # a hook blocked it: do not say it either
        try:
            await session.say(text)
        except VoicehubError as exc:  # the call ended under the question
            log.info("room %s: question not spoken: %s", room.id, exc)
            return None
        return question
