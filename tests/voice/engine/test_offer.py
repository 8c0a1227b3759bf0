"""The offer dialogue alone: the question asked at a time, caller turns and time in, phases out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicehub.voice.engine.offer import (
    ANSWER_TIMEOUT,
    AnswerVerdict,
    OfferDialogue,
    OfferPhase,
    is_yes,
    question,
)

ASKED = 100.0  # the question played out; the deadline is ASKED + 8


@pytest.mark.parametrize(
    ("text", "spoken", "voiced_at", "now", "verdict", "phase"),
    [
        ("yes please", True, 101.0, 102.0, "answer", "accepted"),
        ("sure, go ahead", True, 101.0, 102.0, "answer", "accepted"),
        ("OK", True, 100.5, 101.0, "answer", "accepted"),
        ("no thanks, later", True, 101.0, 102.0, "answer", "declined"),
        ("what about the weather", True, 101.0, 102.0, "answer", "declined"),
        # a turn of voice heard before the question ended answers nothing: still waiting
        ("yes", True, 99.0, 102.0, "earlier audio", "waiting"),
        ("yes", True, None, 102.0, "earlier audio", "waiting"),
        # keys pressed have no voice to check
        ("1 yes", False, None, 102.0, "answer", "accepted"),
        # at or past the deadline the offer is over, declined
        ("yes", True, 107.0, ASKED + ANSWER_TIMEOUT, "late", "declined"),
        ("yes", False, None, 120.0, "late", "declined"),
    ],
)
def test_a_caller_turn_answers_the_offer_or_not(
    text: str,
    spoken: bool,
    voiced_at: float | None,
    now: float,
    verdict: AnswerVerdict,
    phase: OfferPhase,
) -> None:
    offer = OfferDialogue(ASKED)
    assert offer.answer(text, spoken=spoken, voiced_at=voiced_at, now=now) == verdict
    assert offer.phase == phase
    assert offer.reply == (text if verdict == "answer" else None)


def test_only_the_first_answer_counts() -> None:
    offer = OfferDialogue(ASKED)
    assert offer.answer("no", spoken=False, voiced_at=None, now=101.0) == "answer"
    assert offer.answer("yes", spoken=False, voiced_at=None, now=102.0) == "closed"
    assert offer.phase == "declined" and offer.reply == "no"


@pytest.mark.parametrize(
    ("now", "over", "phase"),
    [(ASKED + 7.999, False, "waiting"), (ASKED + 8.0, True, "declined"), (200.0, True, "declined")],
)
def test_the_offer_expires_at_its_deadline(now: float, over: bool, phase: OfferPhase) -> None:
    offer = OfferDialogue(ASKED)
    assert offer.deadline == ASKED + ANSWER_TIMEOUT
    assert offer.expire(now) is over
    assert offer.phase == phase


def test_an_accepted_offer_stays_accepted_and_a_closed_one_is_declined() -> None:
    offer = OfferDialogue(ASKED)
    offer.answer("yes", spoken=False, voiced_at=None, now=101.0)
    assert offer.expire(500.0) and offer.accepted
    offer.close()
    assert offer.accepted  # over already: nothing to decline
    waiting = OfferDialogue(ASKED)
    waiting.close()
    assert waiting.phase == "declined"


def test_a_timeout_that_is_not_positive_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="answer_timeout"):
        OfferDialogue(ASKED, answer_timeout=0.0)


@pytest.mark.parametrize(
    ("text", "yes"),
    [
        ("yes", True),
        ("Yeah sure", True),
        ("please read them", True),
        ("of course", True),
        ("no", False),
        ("not now", False),
        ("yesterday", False),  # a word, not a yes
        ("", False),
    ],
)
def test_what_counts_as_yes(text: str, yes: bool) -> None:
    assert is_yes(text) is yes


def test_the_question_names_the_task_when_there_is_one() -> None:
    assert question("heat pumps") == "I have the results on heat pumps, shall I read them?"
    assert question(None) == question("") == "I have the research results, shall I read them?"


turns = st.tuples(
    st.sampled_from(["yes", "no", "sure", "later", ""]),
    st.booleans(),  # spoken
    st.one_of(st.none(), st.floats(90.0, 120.0)),  # when its voice was heard
    st.floats(0.0, 3.0),  # time passing before it
)


@settings(max_examples=300, deadline=None)
@given(st.lists(turns, max_size=12))
def test_an_offer_is_answered_at_most_once_and_never_past_its_deadline(
    steps: list[tuple[str, bool, float | None, float]],
) -> None:
    offer = OfferDialogue(ASKED)
    now, answers = ASKED, 0
    for text, spoken, voiced_at, passing in steps:
        now += passing
        before = offer.phase
        verdict = offer.answer(text, spoken=spoken, voiced_at=voiced_at, now=now)
        if verdict == "answer":
            answers += 1
            assert before == "waiting" and now < offer.deadline
            assert offer.accepted is is_yes(text)
        elif verdict == "earlier audio":
            assert offer.phase == "waiting"
        else:
            assert offer.phase == "declined" or before != "waiting"
        if before != "waiting":
            assert offer.phase == before  # over is over
    assert answers <= 1
    assert offer.expire(now + ANSWER_TIMEOUT)  # whatever happened, it ends
