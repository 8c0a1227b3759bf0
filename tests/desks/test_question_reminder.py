"""A caller silent after a spoken `ask_user` question hears it again after the desk's idle
prompt (`[voice] idle_prompt_after`), not a generic check-in and not silence: `VoiceAsker`
on a virtual clock, with a session that records what it says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from voicehub.agents.agent import Agent
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.delivery.injector import InjectOutcome
from voicehub.desks.voice_asker import VoiceAsker
from voicehub.hub import Hub
from voicehub.orchestration.ask_user import Question, run_interview
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.idle import question_reminder, reminder_due

QUESTION = "Have you restarted your router, yes or no?"
GUARD = 10.0


class Speaking:
    """A call's session as the asker sees it: what it said, and the call's activity."""

    def __init__(self, clock: VirtualClock) -> None:
        self.agent = Agent(id="handler")
        self.activity = VoiceActivity(clock)
        self.said: list[str] = []

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        self.said.append(text)
        return InjectOutcome.FINISHED


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


def test_the_reminder_is_the_question_after_the_silence_and_never_over_the_caller() -> None:
    assert question_reminder(QUESTION) == f"Are you still there? {QUESTION}"
    assert reminder_due(said_at=10.0, voiced_at=None, speaking=False, after=30.0) == 40.0
    assert reminder_due(said_at=10.0, voiced_at=25.0, speaking=False, after=30.0) == 55.0
    assert reminder_due(said_at=10.0, voiced_at=None, speaking=True, after=30.0) is None
    assert reminder_due(said_at=10.0, voiced_at=None, speaking=False, after=0.0) is None


def caller_says(text: str) -> Event:
    """The caller's recognized answer, as the voice channel posts it."""
    return Event(
        kind=EventKind.TRANSCRIPT,
        text=text,
        role="user",
        source="caller",
        source_type=ChannelType.VOICE,
    )


async def test_a_silent_caller_hears_the_question_again_until_they_answer(hub: Hub) -> None:
    clock = hub.clock
    assert isinstance(clock, VirtualClock)
    room = await hub.create_room("triage:quiet", orchestration=None)
    session = Speaking(clock)
    asker = VoiceAsker(hub, timeout=120.0, remind_after=30.0)
    asker.attach(session)
    asked = asyncio.create_task(asker.ask(room.id, QUESTION))
    await settle()
    assert session.said == [QUESTION]

    await clock.advance(29.0)
    assert session.said == [QUESTION]  # not yet
    await clock.advance(1.0)
    await settle()
    assert session.said == [QUESTION, question_reminder(QUESTION)]

    await clock.advance(10.0)
    session.activity.caller_voiced()  # a sound from the caller: the silence starts over
    await clock.advance(25.0)
    await settle()
    assert len(session.said) == 2
    await clock.advance(5.0)
    await settle()
    assert len(session.said) == 3

    await room.post(caller_says("yes"))
    assert await asyncio.wait_for(asked, GUARD) == "yes"
    await clock.advance(60.0)
    await settle()
    assert len(session.said) == 3  # answered: no more reminders


async def test_without_an_idle_prompt_the_question_is_not_repeated(hub: Hub) -> None:
    clock = hub.clock
    assert isinstance(clock, VirtualClock)
    room = await hub.create_room("triage:off", orchestration=None)
    session = Speaking(clock)
    asker = VoiceAsker(hub, timeout=60.0)
    asker.attach(session)
    asked = asyncio.create_task(asker.ask(room.id, QUESTION))
    await settle()
    await clock.advance(60.0)
    assert await asyncio.wait_for(asked, GUARD) is None  # timed out, never repeated
    assert session.said == [QUESTION]


async def test_the_reminder_repeats_the_question_not_its_preamble(hub: Hub) -> None:
    """The interview's first question goes with the tool's preamble ("Technical support
    here. Let me check a couple of things."); a silent caller hears the question again,
    not the introduction."""
    clock = hub.clock
    assert isinstance(clock, VirtualClock)
    room = await hub.create_room("triage:preamble", orchestration=None)
    session = Speaking(clock)
    asker = VoiceAsker(hub, timeout=120.0, remind_after=30.0)
    asker.attach(session)
    questions = [Question(question=QUESTION, type="yes-no")]
    preamble = "Technical support here. Let me check a couple of things."
    interview = asyncio.create_task(run_interview(asker, room.id, questions, preamble))
    await settle()
    [asked] = session.said
    assert asked.startswith(preamble) and QUESTION in asked

    await clock.advance(30.0)
    await settle()
    assert session.said[1:] == [question_reminder(QUESTION)]
    await room.post(caller_says("yes"))
    done = await asyncio.wait_for(interview, GUARD)
    assert [(a.answer, a.status) for a in done.answers] == [("yes", "answered")]
