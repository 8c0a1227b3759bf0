"""Asking the caller a question on a live call (`ask_user` by voice).

`VoiceAsker` is a `TextAsker` whose `present` speaks the question through the call's voice
session. The answer is the caller's next completed turn: the session does not reply to it
(its `reply_gate` is closed while a question is open, see `reply_gate`) and posts it to the
room as the caller's transcript, where the `TextAsker` hook takes it. Answers are read as in
a text room (`voicehub.orchestration.answers`): yes/no variants, option labels matched
loosely, and a reply that matches nothing is asked again. A caller silent after a question
hears it again after `remind_after` seconds (the desk's idle prompt, `[voice]
idle_prompt_after`), and again after each further silence of that length, until the
question's timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from voicehub.core.clock import wait_or_sleep
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.jobs import cancel_and_wait
from voicehub.delivery.injector import InjectOutcome
from voicehub.errors import VoicehubError
from voicehub.orchestration.ask_user import TextAsker
from voicehub.voice.engine.idle import question_reminder, reminder_due

if TYPE_CHECKING:
    from voicehub.agents.agent import Agent
    from voicehub.core.room import Room
    from voicehub.hub import Hub
    from voicehub.voice.activity import VoiceActivity

__all__ = ["SpeakingSession", "VoiceAsker"]

log = logging.getLogger("voicehub.voice")


class SpeakingSession(Protocol):
    """What `VoiceAsker` needs of a voice session: the agent on the call, `say`, and the
    call's activity (whether the caller speaks, when they were last heard)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def activity(self) -> VoiceActivity: ...

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome: ...


class VoiceAsker(TextAsker):
    """Asks on a call: speaks each question through the call's session (`attach`) and
    records it in the room as the speaking agent's message, marked `ask_user`
    and `spoken`. Waits `timeout` seconds (hub clock) for the answer; None waits for ever.

    The caller may answer while the question is still being spoken (barge-in): the answer
    counts all the same.
    """

    def __init__(
        self, hub: Hub, *, timeout: float | None = 60.0, remind_after: float = 0.0
    ) -> None:
        super().__init__(hub, timeout=timeout)
        self.session: SpeakingSession | None = None
        self.remind_after = remind_after
        self._reminders: dict[str, asyncio.Task[None]] = {}
        self._again: dict[str, str] = {}  # per room: the open question, as a reminder says it

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
        if self.remind_after > 0:
            again = self._again.get(room.id) or text
            self._reminders[room.id] = asyncio.create_task(self._remind(session, again))
        return question

    async def ask(self, room_id: str, text: str, *, again: str = "") -> str | None:
        """Ask `text` and wait for the answer (None on timeout or a closed call); a silent
        caller hears the question again meanwhile (`again`, the question without the
        interview's preamble; else `text`)."""
        self._again[room_id] = again
        try:
            return await super().ask(room_id, text, again=again)
        finally:
            self._again.pop(room_id, None)
            reminder = self._reminders.pop(room_id, None)
            if reminder is not None:
                await cancel_and_wait(reminder)

    async def _remind(self, session: SpeakingSession, question: str) -> None:
        """Say `question` again each time the caller stays silent `remind_after` seconds
        (until cancelled: the question was answered or timed out)."""
        activity, clock = session.activity, self.hub.clock
        said_at = clock.now()
        while True:
            snapshot = activity.snapshot()
            due = reminder_due(
                said_at=said_at,
                voiced_at=snapshot.caller_voiced_at,  # read afresh: the caller's voice
                speaking=snapshot.user_speaking,  # does not wake `wait_for_change`
                after=self.remind_after,
            )
            if due is not None and clock.now() >= due:
                try:
                    await session.say(question_reminder(question))
                except VoicehubError:  # the call ended
                    return
                said_at = clock.now()
                continue
            changed = asyncio.Event()
            watcher = asyncio.ensure_future(_set_on_change(activity, snapshot.version, changed))
            try:
                if due is None:
                    await changed.wait()
                else:
                    await wait_or_sleep(clock, changed, due - clock.now())
            finally:
                watcher.cancel()


async def _set_on_change(activity: VoiceActivity, version: int, changed: asyncio.Event) -> None:
    await activity.wait_for_change(version)
    changed.set()
