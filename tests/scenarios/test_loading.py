"""Scenario files: a broken one fails with its file, line, what is wrong and the valid
names; the shorthand forms mean what the long ones do."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicehub.desks.desk import Desk, load_desks
from voicehub.errors import ConfigError
from voicehub.scenarios.loading import find_scenario_files, load_scenarios
from voicehub.scenarios.model import ReplyExpectation, ToolExpectation

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return load_desks(CHANNELS)


def problem(tmp_path: Path, desks: dict[str, Desk], text: str) -> str:
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_scenarios(path, desks)
    return str(caught.value).replace(str(path), "FILE")


def test_an_unknown_key_names_its_line_and_the_valid_keys(
    tmp_path: Path, desks: dict[str, Desk]
) -> None:
    text = 'desk = "research"\n\n[[scenario]]\nname = "x"\n\n[[scenario.steps]]\n'
    text += 'say = "hello"\nexpect_tol = "delegate_workers"\n'
    assert problem(tmp_path, desks, text) == (
        "FILE:8: scenario[0].steps[0]: unknown key 'expect_tol'; valid keys: barge_in, "
        "call_back, expect_handoff, expect_reply, expect_tool, hang_up, keypad, pause, say, "
        "silence, text, voice, wait"
    )
    text = 'desk = "research"\ncolour = 1\n[[scenario]]\nname = "x"\nsteps = [{ say = "a" }]\n'
    assert problem(tmp_path, desks, text) == (
        "FILE:2: top level: unknown key 'colour'; valid keys: desk, scenario"
    )
    text = 'desk = "research"\n[[scenario]]\nname = "x"\nsteps = [{ say = "a" }]\n'
    text += "[scenario.expect]\ndelivered_twice = true\n"
    assert problem(tmp_path, desks, text) == (
        "FILE:6: scenario[0].expect: unknown key 'delivered_twice'; valid keys: delivered_once, "
        "deliveries, held_until_call_back, judge, voice_to_voice_p95"
    )


def test_an_expectation_naming_no_tool_of_the_desk_lists_its_tools(
    tmp_path: Path, desks: dict[str, Desk]
) -> None:
    text = 'desk = "research"\n\n[[scenario]]\nname = "x"\n\n[[scenario.steps]]\n'
    text += 'text = "research heat pumps"\n'
    text += 'expect_tool = { name = "delegate_worker", arguments = { task = "heat pumps" } }\n'
    assert problem(tmp_path, desks, text) == (
        "FILE:8: scenario[0].steps[0].expect_tool: 'delegate_worker' is no tool of desk "
        "'research'; its tools: cancel_task, check_tasks, delegate_workers, search_knowledge"
    )


def test_unknown_desks_agents_and_steps_that_are_not_one_action(
    tmp_path: Path, desks: dict[str, Desk]
) -> None:
    text = 'desk = "reserch"\n[[scenario]]\nname = "x"\nsteps = [{ say = "a" }]\n'
    message = problem(tmp_path, desks, text)
    assert message.startswith("FILE:1: desk: unknown desk 'reserch'; desks here: drafting,")
    text = 'desk = "triage"\n[[scenario]]\nname = "x"\n[[scenario.steps]]\n'
    text += 'text = "broken"\nexpect_handoff = "technician"\n'
    assert problem(tmp_path, desks, text) == (
        "FILE:6: scenario[0].steps[0].expect_handoff: 'technician' is no agent of desk "
        "'triage'; its agents: handler, resolver, triage"
    )
    text = 'desk = "research"\n[[scenario]]\nname = "x"\n[[scenario.steps]]\n'
    text += 'say = "a"\ntext = "b"\n[[scenario.steps]]\nbarge_in = 1\ntext = "c"\n'
    assert problem(tmp_path, desks, text).splitlines() == [
        "FILE:4: scenario[0].steps[0]: a step takes exactly one of say, text, keypad, silence, "
        "hang_up, call_back (found say, text)",
        "FILE:7: scenario[0].steps[1]: `barge_in` is for a `say` step (speech over the agent) "
        "or a `hang_up`",
    ]
    assert "not valid TOML" in problem(tmp_path, desks, 'desk = "research\n')


def test_shorthands_and_where_files_are_found(tmp_path: Path, desks: dict[str, Desk]) -> None:
    source = load_scenarios(CHANNELS / "scenarios" / "research.toml", desks)
    first = source.file.scenario[0].steps[0]
    assert first.tools == [
        ToolExpectation(name="delegate_workers", arguments={"task": "heat pumps"})
    ]
    assert first.expect_reply == ReplyExpectation(contains="analysts")
    found = find_scenario_files([CHANNELS])
    assert (CHANNELS / "scenarios" / "research.toml", CHANNELS) in found
    # every example desk has scenarios
    assert {load_scenarios(path, desks).file.desk for path, _ in found} == set(desks)
    with pytest.raises(ConfigError, match="no scenario files"):
        find_scenario_files([tmp_path])
