"""Words that end mid-request, and hesitation repair."""

from __future__ import annotations

import pytest

from voicehub.voice.turns.repair import merge_words, resumes_turn
from voicehub.voice.turns.words import ends_inside, ends_open, makes_request, spoken_words

TOPICS = ("heat pumps", "solar panels", "led lights")


@pytest.mark.parametrize(
    "text",
    [
        "Could you find out about",
        "I would like you to,",
        "please draft something on the",
        "could you, um",
        "could you",
        "I'd like",
        "my internet is",
        "look into heat",
        "research solar...",
    ],
)
def test_words_ending_mid_request_are_open(text: str) -> None:
    assert ends_open(text, phrases=TOPICS)


@pytest.mark.parametrize(
    "text",
    ["research heat pumps for me please.", "what are solar panels?", "go on", "hold on", "", "."],
)
def test_finished_words_are_not(text: str) -> None:
    assert not ends_open(text, phrases=TOPICS)


def test_the_desk_says_which_half_requests_it_waits_on() -> None:
    waits = {"could you research"}
    assert ends_open("Could you research?", lambda text: text in waits)
    assert not ends_open("Could you research heat pumps?", lambda text: text in waits)


def test_ends_inside_a_phrase_of_more_words() -> None:
    assert ends_inside(spoken_words("tell me about led"), TOPICS)
    assert not ends_inside(spoken_words("tell me about led lights"), TOPICS)
    assert not ends_inside(spoken_words("lights"), TOPICS)


def test_a_resumed_turn_is_merged_only_before_the_reply_is_heard() -> None:
    assert resumes_turn(committed_at=1.0, resumed_at=1.3, reply_heard_at=None, window=2.0)
    assert resumes_turn(committed_at=1.0, resumed_at=1.3, reply_heard_at=1.5, window=2.0)
    assert not resumes_turn(committed_at=1.0, resumed_at=1.6, reply_heard_at=1.5, window=2.0)
    assert not resumes_turn(committed_at=1.0, resumed_at=3.5, reply_heard_at=None, window=2.0)
    assert not resumes_turn(committed_at=1.0, resumed_at=0.5, reply_heard_at=None, window=2.0)


@pytest.mark.parametrize(
    ("first", "second", "merged"),
    [
        ("Could you research.", "Heat pumps for me.", "Could you research heat pumps for me."),
        ("Could you research,", "I think heat pumps.", "Could you research I think heat pumps."),
        ("Find out about...", "LED lights.", "Find out about LED lights."),
        ("", "Heat pumps.", "Heat pumps."),
        ("Research.", "", "Research"),
    ],
)
def test_two_stretches_read_as_one_sentence(first: str, second: str, merged: str) -> None:
    assert merge_words(first, second) == merged


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        ("Tell me the opening hours of the library,", True),  # Moonshine's comma
        ("tell me the opening hours of the library", True),
        ("Tell me the opening hours of the library?", True),
        ("Tell me the opening hours of the library...", False),  # trailing off
        ("Tell me the opening hours of the library \u2026", False),
        ("Tell me the opening hours of the library -", False),
        ("My robber,", False),  # no rule of the desk takes it
        ("", False),
        ("...", False),
    ],
)
def test_words_the_desk_takes_make_a_request_unless_they_trail_off(text: str, whole: bool) -> None:
    def takes(words: str) -> bool:
        return "library" in words.lower()

    assert makes_request(text, takes) is whole
