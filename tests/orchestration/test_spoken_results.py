"""What the caller hears of several workers' results: each finding once, no markers."""

from __future__ import annotations

import json

import pytest

from voicehub import Agent, Hub, ScriptedLLM, Supervisor
from voicehub.agents.llm import TextDelta
from voicehub.orchestration.loop import Loop
from voicehub.orchestration.spoken_results import merge_answers, without_draft_label

NOTE = (
    "A heat pump moves heat from the outside air or the ground into your home. "
    "For each unit of electricity it delivers about three units of heat."
)


def test_two_workers_reading_the_same_notes_are_heard_once() -> None:
    merged = merge_answers(
        [f"Here is what I found. {NOTE}", f"I checked our notes as well. {NOTE}"]
    )
    assert merged == f"Here is what I found. {NOTE}"


def test_new_findings_stay_and_in_the_workers_order() -> None:
    merged = merge_answers(
        [
            f"Here is what I found. {NOTE}",
            "I checked the prices too. An air source heat pump costs 7000 to 13000 pounds. " + NOTE,
        ]
    )
    assert merged.split("\n") == [
        f"Here is what I found. {NOTE}",
        "I checked the prices too. An air source heat pump costs 7000 to 13000 pounds.",
    ]


def test_restated_sentences_merge_but_different_figures_do_not() -> None:
    restated = "For each unit of electricity, it delivers about three units of heat!"
    assert merge_answers([NOTE, restated]) == NOTE
    first = "A typical installation costs 9000 pounds in the United Kingdom."
    other = "A typical installation costs 12000 pounds in the United Kingdom."
    assert merge_answers([first, other]) == f"{first}\n{other}"
    assert merge_answers(["Yes.", "Yes."]) == "Yes."  # too short to be a finding: exact only


def test_a_failed_workers_line_is_never_merged_away() -> None:
    failure = "analyst-b timed out: no answer within 60 s"
    merged = merge_answers([NOTE, failure, failure], keep_whole=[False, True, True])
    assert merged == f"{NOTE}\n{failure}\n{failure}"


@pytest.mark.parametrize(
    "draft",
    [
        "Reviewed draft. Electric cars run on a battery.",
        "Revised draft: Electric cars run on a battery.",
        "**Final draft:** Electric cars run on a battery.",
        "## Draft 2 - Electric cars run on a battery.",
        "Electric cars run on a battery.",
    ],
)
def test_a_heading_for_the_reviewers_is_not_spoken(draft: str) -> None:
    assert without_draft_label(draft) == "Electric cars run on a battery."


def test_a_draft_about_drafts_keeps_its_words() -> None:
    assert without_draft_label("Drafting rules changed in May.") == "Drafting rules changed in May."
    assert without_draft_label("Draft:") == "Draft:"  # nothing else to say: left alone


class _Writer:
    """An LLM writer that heads its drafts for the reviewers, as models often do."""

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, messages, tools=(), *, tool_choice="auto"):  # type: ignore[no-untyped-def]
        self.calls += 1
        yield TextDelta(text=f"Revised draft {self.calls}: Tidal power uses the tides.")


async def test_a_loop_result_from_a_model_is_spoken_without_its_heading() -> None:
    writer = Agent(id="writer", llm=_Writer())
    approve = {"tool": "submit_verdict", "arguments": {"approved": True}, "match": ["*"]}
    editor = Agent(id="editor", llm=ScriptedLLM([approve]))
    loop = Loop(writer, [editor])
    async with Hub(orchestration=loop) as hub:
        await hub.create_room("r")
        result = await loop.run(hub, "r", "tidal power")
    assert result.approved and result.output == "Tidal power uses the tides."


async def test_a_supervisor_result_from_model_workers_is_merged() -> None:
    class _Analyst:
        def __init__(self, opening: str) -> None:
            self.opening = opening

        async def stream(self, messages, tools=(), *, tool_choice="auto"):  # type: ignore[no-untyped-def]
            yield TextDelta(text=f"{self.opening} {NOTE}")

    workers = [
        Agent(id="a", llm=_Analyst("Here is what I found.")),
        Agent(id="b", llm=_Analyst("Our notes agree.")),
    ]
    desk = Agent(id="desk", llm=ScriptedLLM([]))
    supervisor = Supervisor(desk, workers, strategy="parallel")
    async with Hub(orchestration=supervisor) as hub:
        await hub.create_room("r")
        results = await supervisor.run_workers(hub, "r", "heat pumps")
    from voicehub.orchestration.supervisor import combine

    assert combine(results) == f"Here is what I found. {NOTE}"
    assert json.dumps(combine(results)).count("three units") == 1
