"""Half requests and recognizer punctuation in the scripted agents."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from voicehub.agents.llm import ChatMessage, TextDelta, ToolCallChunk, ToolSpec
from voicehub.agents.scripted import ScriptedLLM, ScriptedRule
from voicehub.agents.scripted_intent import filler_cuts, without_punctuation

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOOLS = [ToolSpec(name=n) for n in ("delegate_workers", "check_tasks", "cancel_task")]
TOOLS += [ToolSpec(name="search_knowledge")]


@pytest.fixture(scope="module")
def research() -> ScriptedLLM:
    with (CHANNELS / "research.toml").open("rb") as file:
        scripted = tomllib.load(file)["agents"][0]["scripted"]
    return ScriptedLLM(scripted["rules"], fallback=scripted["fallback"])


def conversation(
    llm: ScriptedLLM, *turns: str
) -> list[tuple[list[str], list[tuple[str, dict[str, str]]]]]:
    """Each caller turn in order, with what the agent said and the tools it called."""
    messages: list[ChatMessage] = []
    answers = []
    for turn in turns:
        messages.append(ChatMessage(role="user", content=turn))
        chunks = llm.respond(messages, TOOLS)
        said = [c.text for c in chunks if isinstance(c, TextDelta)]
        calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
        answers.append((said, [(c.name, json.loads(c.arguments)) for c in calls]))
        messages.append(
            ChatMessage(role="assistant", content=" ".join(said), tool_calls=tuple(calls))
        )
        messages += [
            ChatMessage(role="tool", content="dispatched", tool_call_id=c.id, name=c.name)
            for c in calls
        ]
    return answers


def test_a_half_request_is_asked_about_and_finished_by_the_next_turn(research: ScriptedLLM) -> None:
    (asked, nothing), (said, called) = conversation(research, "Could you research", "Heat pumps.")
    assert asked == ["What should my analysts research?"] and nothing == []
    assert called == [("delegate_workers", {"task": "heat pumps"})]
    assert said == ["Sure, I'll have my analysts look into heat pumps."]


@pytest.mark.parametrize(
    "half",
    ["could you research, um,", "Could you research for me, please?", "Please find out about"],
)
def test_fillers_and_politeness_after_the_request_leave_it_half(
    research: ScriptedLLM, half: str
) -> None:
    (asked, _), (_, called) = conversation(research, half, "wind turbines")
    assert asked == ["What should my analysts research?"]
    assert called == [("delegate_workers", {"task": "wind turbines"})]


def test_a_request_of_its_own_is_not_read_after_a_half_one(research: ScriptedLLM) -> None:
    _, (_, called) = conversation(research, "could you research", "how is it going")
    assert [name for name, _ in called] == ["check_tasks"]
    _, (_, called) = conversation(research, "could you research", "never mind")
    assert [name for name, _ in called] == ["cancel_task"]
    _, (greeting, called) = conversation(research, "could you research", "hi")
    assert called == [] and greeting[0].startswith("Hello!")
    # only the turn right after the half request finishes it
    _, _, (said, called) = conversation(research, "could you research", "hi", "heat pumps")
    assert called == [] and said[0].startswith("I can have my analysts research")


def test_words_that_end_on_a_trigger_are_a_half_request_only_when_nothing_takes_them(
    research: ScriptedLLM,
) -> None:
    assert research.awaits_more("could you research")
    assert research.awaits_more("What is")
    assert not research.awaits_more("any news on my research")  # a status request
    assert not research.awaits_more("research heat pumps please")
    assert not research.awaits_more("hello there")


PUNCTUATION = st.sampled_from([",", ".", "?", "!", ";", ":", " -", "...", ""])


@given(marks=st.lists(PUNCTUATION, min_size=8, max_size=8))
def test_recognizer_punctuation_never_reaches_a_tool_or_an_echo(marks: list[str]) -> None:
    with (CHANNELS / "research.toml").open("rb") as file:
        scripted = tomllib.load(file)["agents"][0]["scripted"]
    llm = ScriptedLLM(scripted["rules"], fallback=scripted["fallback"])
    words = ["could", "you", "research", "heat", "pumps", "for", "me", "please"]
    heard = " ".join(word + mark for word, mark in zip(words, marks, strict=False))
    [(said, called)] = conversation(llm, heard.capitalize())
    assert called == [("delegate_workers", {"task": "heat pumps"})], heard
    assert said == ["Sure, I'll have my analysts look into heat pumps."], heard


def test_punctuation_inside_numbers_and_words_stays() -> None:
    assert without_punctuation("At 7:30, for 1,000 people; it's 3.5 km.") == (
        "At 7:30 for 1,000 people it's 3.5 km"
    )
    assert filler_cuts("could you research um for me please") == [
        "could you research um for me please",
        "could you research um for me",
        "could you research um",
        "could you research",
    ]


def test_ask_needs_a_rule_that_takes_the_subject() -> None:
    with pytest.raises(ValidationError, match="`ask` needs a `regex` with a named group"):
        ScriptedRule(match=("research",), say="What topic?", ask="What should I research?")
    rule = ScriptedRule(regex=r"research (?P<topic>.+)", tool="t", ask="What topic?")
    assert rule.ask == "What topic?"


def test_a_half_request_is_finished_by_a_topic_a_rule_would_only_ask_about() -> None:
    with (CHANNELS / "frontdesk.toml").open("rb") as file:
        scripted = tomllib.load(file)["agents"][0]["scripted"]
    desk = ScriptedLLM(scripted["rules"], fallback=scripted["fallback"])
    tools = [ToolSpec(name=n) for n in ("delegate", "ask_user", "cancel_task", "check_tasks")]

    def reply(*turns: str) -> list[tuple[str, dict[str, str]]]:
        messages = [ChatMessage(role="user", content=turn) for turn in turns]
        chunks = desk.respond(messages, tools)
        return [
            (c.call.name, json.loads(c.call.arguments))
            for c in chunks
            if isinstance(c, ToolCallChunk)
        ]

    # alone, "heat pumps" says no more than a topic: the desk asks what to do with it
    assert [name for name, _ in reply("The price on heat pumps.")] == ["ask_user"]
    # after "can you research", it is what to research
    [(name, arguments)] = reply("Can you research?", "The price on heat pumps.")
    assert name == "delegate" and arguments["instruction"] == "the price on heat pumps"
