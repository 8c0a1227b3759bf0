"""ask_user: answer parsing (tables), the interview logic, and the text-room asker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import EventKind
from voicehub.core.hooks import HookTrigger
from voicehub.core.room import Room
from voicehub.hub import Hub
from voicehub.orchestration.answers import (
    ParsedAnswer,
    QuestionType,
    match_options,
    parse_answer,
    parse_yes_no,
    same_answer,
)
from voicehub.orchestration.ask_user import (
    ANSWER_ROUTE,
    Condition,
    Question,
    TextAsker,
    ask_user_tool,
    render_question,
    run_interview,
)

GUARD = 5.0

# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("yes", True),
        ("Yes.", True),
        ("YEAH!", True),
        ("yep", True),
        ("yup", True),
        ("sure", True),
        ("sure thing", True),
        ("correct", True),
        ("that's right", True),
        ("of course", True),
        ("absolutely", True),
        ("ok go ahead", True),
        ("uh huh", True),
        ("yes please", True),
        ("yes I'm sure", True),
        ("no", False),
        ("No.", False),
        ("nope", False),
        ("nah", False),
        ("not really", False),
        ("no thanks", False),
        ("that's not right", False),
        ("absolutely not", False),
        ("I don't think so", False),
        ("please don't", False),
        ("yeah, no", False),  # colloquial no: the last word wins
        ("yes... no wait, no", False),
        ("no, yes actually", True),
        ("I'm not sure", None),
        ("maybe", None),
        ("I don't know", None),
        ("purple", None),
        ("yesterday", None),
        ("", None),
    ],
)
def test_yes_no(reply: str, expected: bool | None) -> None:
    assert parse_yes_no(reply) is expected


CHANNELS = ["Email", "Phone", "Post"]
TEAMS = ["Technical support", "Billing question", "Sales"]
LETTERS = ["A", "B", "C"]


@pytest.mark.parametrize(
    ("labels", "reply", "expected"),
    [
        (CHANNELS, "email", ["Email"]),
        (CHANNELS, "PHONE!", ["Phone"]),
        (CHANNELS, "I'd like the post please", ["Post"]),
        (CHANNELS, "emails", ["Email"]),
        (CHANNELS, "2", ["Phone"]),
        (CHANNELS, "two", ["Phone"]),
        (CHANNELS, "number two", ["Phone"]),
        (CHANNELS, "option to", ["Phone"]),  # a recognizer's "two"
        (CHANNELS, "the second one", ["Phone"]),
        (CHANNELS, "the 3rd", ["Post"]),
        (CHANNELS, "first", ["Email"]),
        (CHANNELS, "the last one", ["Post"]),
        (CHANNELS, "the fifth one", None),  # out of range
        (CHANNELS, "email or phone", None),  # two named: ask again, do not guess
        (CHANNELS, "carrier pigeon", None),
        (TEAMS, "tech", ["Technical support"]),
        (TEAMS, "I have a billing problem", ["Billing question"]),
        (TEAMS, "sales.", ["Sales"]),
        (LETTERS, "b", ["B"]),
        (LETTERS, "option C", ["C"]),
    ],
)
def test_single_select(labels: list[str], reply: str, expected: list[str] | None) -> None:
    assert match_options(labels, reply) == expected


@pytest.mark.parametrize(
    ("labels", "reply", "expected"),
    [
        (LETTERS, "A and C", ["A", "C"]),
        (LETTERS, "c, a", ["A", "C"]),
        (LETTERS, "1, 3", ["A", "C"]),
        (LETTERS, "one and three", ["A", "C"]),
        (LETTERS, "the first and the third", ["A", "C"]),
        (LETTERS, "all of them", ["A", "B", "C"]),
        (LETTERS, "none", []),
        (CHANNELS, "email and phone", ["Email", "Phone"]),
        (CHANNELS, "phone, plus the last one", ["Phone", "Post"]),
        (CHANNELS, "both", ["Email", "Phone", "Post"]),
        (CHANNELS, "carrier pigeon", None),
        (["Phone and email", "Phone"], "phone and email", ["Phone and email"]),
    ],
)
def test_multi_select(labels: list[str], reply: str, expected: list[str] | None) -> None:
    assert match_options(labels, reply, multiple=True) == expected


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        ("freeform", "  call me at 5 ", ParsedAnswer("call me at 5")),
        ("freeform", "", ParsedAnswer(skipped=True)),
        ("freeform", "skip", ParsedAnswer(skipped=True)),
        ("yes-no", "No preference", ParsedAnswer(skipped=True)),
        ("yes-no", "yep", ParsedAnswer("yes")),
        ("confirm", "cancel", ParsedAnswer("no")),
        ("confirm", "hmm", None),
        ("single-select", "up to you", ParsedAnswer(skipped=True)),
        ("single-select", "the second one", ParsedAnswer("Phone")),
        ("multi-select", "email and post", ParsedAnswer(["Email", "Post"])),
        ("multi-select", "neither", ParsedAnswer([])),
    ],
)
def test_parse_answer(kind: QuestionType, reply: str, expected: ParsedAnswer | None) -> None:
    assert parse_answer(kind, CHANNELS, reply) == expected


def test_an_option_that_reads_like_a_skip_is_an_option() -> None:
    assert parse_answer("single-select", ["Any", "Morning"], "any") == ParsedAnswer("Any")
    assert parse_answer("multi-select", ["None", "Wifi"], "None.") == ParsedAnswer(["None"])
    assert parse_answer("single-select", ["Morning"], "any") == ParsedAnswer(skipped=True)


def test_conditions_and_loose_equality() -> None:
    stored: dict[str, Any] = {"channel": "Phone", "callback": "yes", "extras": ["A", "C"]}
    assert Condition.parse("channel == phone").holds(stored)
    assert Condition.parse("channel=='Phone'").holds(stored)
    assert not Condition.parse("channel != Phone").holds(stored)
    assert Condition.parse("callback == true").holds(stored)
    assert Condition.parse("extras == c").holds(stored)
    assert not Condition.parse("missing == x").holds(stored)
    assert Condition.parse("missing != x").holds(stored)
    assert not same_answer(None, "x")
    with pytest.raises(ValueError, match="must look like"):
        Condition.parse("channel is phone")


def test_question_validation() -> None:
    with pytest.raises(ValidationError, match="needs options"):
        Question(question="Which?", type="single-select")
    with pytest.raises(ValidationError, match="only for select questions"):
        Question(question="Ok?", type="yes-no", options=[{"label": "x"}])
    with pytest.raises(ValidationError, match="not a valid yes-no answer"):
        Question(question="Ok?", type="yes-no", default="perhaps")
    with pytest.raises(ValidationError, match="must look like"):
        Question(question="Ok?", show_if="nonsense")
    question = Question(
        question="Which?",
        type="single-select",
        options=[{"label": "Email"}, {"label": "Phone", "description": "we call you"}],
        default="phone",
        header="Contact",
    )
    assert question.default_value() == "Phone"
    assert render_question(question, preamble="About your order.") == (
        "About your order.\nContact: Which?\n1. Email\n2. Phone - we call you"
    )
    assert render_question(question, retry=True) == (
        "Sorry, I didn't catch that.\nContact: Which?\n1. Email\n2. Phone - we call you\n"
        "Please say the option or its number."
    )


# -- the interview, with any Asker -------------------------------------------------------------


class ScriptedAsker:
    """An Asker replaying replies (None: skipped or timed out); keeps what it asked."""

    def __init__(self, replies: Sequence[str | None]) -> None:
        self.replies = list(replies)
        self.asked: list[str] = []

    async def ask(self, room_id: str, text: str, *, again: str = "") -> str | None:
        self.asked.append(text)
        return self.replies.pop(0)


def callback_questions() -> list[Question]:
    return [
        Question.model_validate(q)
        for q in [
            {
                "question": "Do you want a callback?",
                "type": "yes-no",
                "store": "callback",
                "finish_if": "no",
            },
            {
                "question": "How should we reach you?",
                "type": "single-select",
                "options": [{"label": "Email"}, {"label": "Phone"}],
                "store": "channel",
            },
            {"question": "What number should we call?", "show_if": "channel == Phone"},
            {"question": "Anything else?", "default": "nothing"},
        ]
    ]


def answers_of(result: Any) -> list[tuple[Any, str]]:
    return [(a["answer"], a["status"]) for a in result["answers"]]


async def test_interview_store_show_if_and_default_on_skip() -> None:
    asker = ScriptedAsker(["yeah", "the second one", "555 1234", None])
    result = (await run_interview(asker, "r", callback_questions(), "Hi!")).model_dump()
    assert answers_of(result) == [
        ("yes", "answered"),
        ("Phone", "answered"),
        ("555 1234", "answered"),
        ("nothing", "default"),
    ]
    assert result["stored"] == {"callback": "yes", "channel": "Phone"}
    assert asker.asked[0].startswith("Hi!\nDo you want a callback?")
    assert not asker.asked[1].startswith("Hi!")  # the preamble goes with the first question


async def test_interview_show_if_hides_and_finish_if_ends() -> None:
    hidden = await run_interview(ScriptedAsker(["yes", "email", "no"]), "r", callback_questions())
    assert [a.status for a in hidden.answers] == ["answered", "answered", "not_shown", "answered"]
    ended = await run_interview(ScriptedAsker(["not really"]), "r", callback_questions())
    assert ended.finished_early
    assert [a.status for a in ended.answers] == ["answered", "not_asked", "not_asked", "not_asked"]


async def test_interview_reasks_with_a_hint_then_uses_the_default() -> None:
    question = Question(question="Proceed?", type="confirm", default="no")
    asker = ScriptedAsker(["purple", "banana", "what?"])
    result = await run_interview(asker, "r", [question], max_reasks=2)
    assert [(a.answer, a.status) for a in result.answers] == [("no", "default")]
    assert len(asker.asked) == 3
    assert asker.asked[1] == (
        "Sorry, I didn't catch that.\nProceed?\nPlease say yes to confirm or no to cancel."
    )
    no_default = await run_interview(ScriptedAsker(["?", "yes"]), "r", [Question(question="Q?")])
    assert no_default.answers[0].answer == "?"  # freeform takes anything
    skipped = await run_interview(ScriptedAsker([None]), "r", [Question(question="Q?")])
    assert [(a.answer, a.status) for a in skipped.answers] == [(None, "skipped")]


# -- the text room --------------------------------------------------------------------------


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def hub(clock: VirtualClock) -> AsyncIterator[Hub]:
    hub = Hub(clock=clock)
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


def asking_agent(questions: list[dict[str, Any]]) -> Agent:
    llm = ScriptedLLM(
        [
            {
                "match": ["book"],
                "tool": "ask_user",
                "arguments": {"questions": questions, "preamble": "Let's book it."},
                "reply": "Thanks. {result}",
            },
        ],
        fallback="I only book calls.",
    )
    return Agent(id="assistant", llm=llm)


async def text_room(hub: Hub, questions: list[dict[str, Any]]) -> tuple[Room, TextChannel]:
    room = await hub.create_room("call", orchestration=None)
    text = TextChannel("web")
    await room.attach(text)
    asker = TextAsker(hub, agent_id="assistant", timeout=60.0)
    await room.attach(AgentChannel(asking_agent(questions), extra_tools=[ask_user_tool(asker)]))
    return room, text


async def next_text(text: TextChannel) -> str:
    return (await asyncio.wait_for(text.receive("call"), GUARD)).text


async def final_answers(text: TextChannel, turn: asyncio.Task[Any]) -> dict[str, Any]:
    reply = await next_text(text)
    await asyncio.wait_for(turn, GUARD)
    assert reply.startswith("Thanks. ")
    result: dict[str, Any] = json.loads(reply.removeprefix("Thanks. "))
    return result


YES_NO: dict[str, Any] = {"question": "Shall I book it?", "type": "yes-no", "default": "no"}
PICK: dict[str, Any] = {
    "question": "Which day?",
    "type": "single-select",
    "options": [{"label": "Monday"}, {"label": "Tuesday"}],
}


async def test_text_room_yes_no_and_single_select(hub: Hub) -> None:
    room, text = await text_room(hub, [YES_NO, PICK])
    turn = asyncio.create_task(text.send(room, "book a call"))
    assert await next_text(text) == "Let's book it.\nShall I book it?"
    await asyncio.wait_for(text.send(room, "yep"), GUARD)
    assert await next_text(text) == "Which day?\n1. Monday\n2. Tuesday"
    await asyncio.wait_for(text.send(room, "the second one"), GUARD)
    result = await final_answers(text, turn)
    assert answers_of(result) == [("yes", "answered"), ("Tuesday", "answered")]

    events = await hub.history("call")
    questions = [e for e in events if e.metadata.get("ask_user")]
    answers = [e for e in events if e.metadata.get("_routed_to") == ANSWER_ROUTE]
    assert [e.text for e in answers] == ["yep", "the second one"]
    assert [e.metadata["_answer_to"] for e in answers] == [e.id for e in questions]
    # The answers did not start agent replies: one reply to "book a call", nothing else.
    spoken = [e.text for e in events if e.kind is EventKind.MESSAGE and e.source == "assistant"]
    assert len(spoken) == 3
    # With no question open the hook is gone and the agent answers as usual.
    assert not hub.hooks.has(HookTrigger.BEFORE_BROADCAST, "call")
    await asyncio.wait_for(text.send(room, "hello"), GUARD)
    assert [e.text for e in text.pending("call")] == ["I only book calls."]


async def test_text_room_reasks_when_nothing_matches(hub: Hub) -> None:
    room, text = await text_room(hub, [PICK])
    turn = asyncio.create_task(text.send(room, "book a call"))
    assert await next_text(text) == "Let's book it.\nWhich day?\n1. Monday\n2. Tuesday"
    await asyncio.wait_for(text.send(room, "whenever the sun shines"), GUARD)
    assert await next_text(text) == (
        "Sorry, I didn't catch that.\nWhich day?\n1. Monday\n2. Tuesday\n"
        "Please say the option or its number."
    )
    await asyncio.wait_for(text.send(room, "monday"), GUARD)
    assert answers_of(await final_answers(text, turn)) == [("Monday", "answered")]


async def test_text_room_default_on_timeout(hub: Hub, clock: VirtualClock) -> None:
    room, text = await text_room(hub, [YES_NO, PICK])
    turn = asyncio.create_task(text.send(room, "book a call"))
    assert (await next_text(text)).endswith("Shall I book it?")
    await clock.advance(59.0)
    assert text.pending("call") == []  # still waiting
    await clock.advance(1.0)
    assert (await next_text(text)).startswith("Which day?")
    await clock.advance(60.0)
    assert answers_of(await final_answers(text, turn)) == [("no", "default"), (None, "skipped")]


async def test_text_room_store_show_if_finish_if(hub: Hub) -> None:
    questions = [
        {**YES_NO, "store": "book", "finish_if": "no"},
        {**PICK, "store": "day"},
        {"question": "Morning or afternoon on Tuesday?", "show_if": "day == Tuesday"},
        {"question": "Anything else?"},
    ]
    room, text = await text_room(hub, questions)
    turn = asyncio.create_task(text.send(room, "book a call"))
    await next_text(text)
    await asyncio.wait_for(text.send(room, "sure"), GUARD)
    await next_text(text)
    await asyncio.wait_for(text.send(room, "Monday."), GUARD)
    assert await next_text(text) == "Anything else?"  # the Tuesday question was not shown
    await asyncio.wait_for(text.send(room, "no, that's all"), GUARD)
    result = await final_answers(text, turn)
    assert answers_of(result) == [
        ("yes", "answered"),
        ("Monday", "answered"),
        (None, "not_shown"),
        ("no, that's all", "answered"),
    ]
    assert result["stored"] == {"book": "yes", "day": "Monday"}

    turn = asyncio.create_task(text.send(room, "book again"))
    await next_text(text)
    await asyncio.wait_for(text.send(room, "nope"), GUARD)
    result = await final_answers(text, turn)
    assert result["finished_early"] is True
    assert [a["status"] for a in result["answers"]] == ["answered", *["not_asked"] * 3]


async def test_bad_questions_are_a_tool_error_and_closing_the_room_ends_the_wait(
    hub: Hub,
) -> None:
    room, text = await text_room(hub, [{"question": "Which?", "type": "single-select"}])
    await asyncio.wait_for(text.send(room, "book a call"), GUARD)
    (reply,) = text.pending("call")
    assert "error in tool ask_user: bad arguments" in reply.text
    assert "needs options" in reply.text

    asker = TextAsker(hub, timeout=None)
    waiting = asyncio.create_task(asker.ask("call", "Still there?"))
    await asyncio.sleep(0)
    assert asker.waiting("call")
    await hub.close_room("call")
    assert await asyncio.wait_for(waiting, GUARD) is None
    assert not asker.waiting("call")
    assert await asker.ask("call", "Hello?") is None  # the room is gone
