"""A desk's turn-taking settings: `[voice] turn` and `max_turn_silence`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.desks.test_loading import VALID, error_of, write_desk
from voicehub.desks.desk import load_desks
from voicehub.desks.loading import load_desk_file
from voicehub.desks.turns import desk_turn_setup, desk_words_complete, desk_words_open

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


def test_turns_default_to_the_model_with_a_two_second_ceiling(tmp_path: Path) -> None:
    voice = load_desk_file(write_desk(tmp_path, VALID)).voice
    assert (voice.turn, voice.max_turn_silence) == ("model", 2.0)
    text = VALID.replace(
        'title = "Mini desk"',
        'title = "Mini desk"\n\n[voice]\nturn = "vad"\nmax_turn_silence = 1.5\n',
    )
    voice = load_desk_file(write_desk(tmp_path, text)).voice
    assert (voice.turn, voice.max_turn_silence) == ("vad", 1.5)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('turn = "smart"', "voice.turn"),
        ("max_turn_silence = 0.2", "voice.max_turn_silence"),
        ("max_turn_silence = 60", "voice.max_turn_silence"),
        ('engine = "openai-realtime"\nturn = "vad"', "the realtime model takes its own turns"),
    ],
)
def test_bad_turn_settings_are_named(tmp_path: Path, table: str, expected: str) -> None:
    text = VALID.replace('title = "Mini desk"', f'title = "Mini desk"\n\n[voice]\n{table}\n')
    assert expected in error_of(tmp_path, text)


def test_the_example_desks_turn_on_the_model_and_read_their_own_half_requests() -> None:
    desks = load_desks(CHANNELS)
    setup = desk_turn_setup(desks["research"])
    assert setup.settings.mode == "model" and setup.model is not None
    words_open = desk_words_open(desks["research"])
    assert words_open("Could you research")  # its scripted agent waits for a topic
    assert words_open("please look into heat")  # inside a knowledge topic
    assert not words_open("please look into heat pumps")
    assert not words_open("any news on my research")
    assert desk_words_open(desks["frontdesk"])("could you research")  # through its wrapper
    assert not desk_words_open(desks["triage"])("my router does not work")


@pytest.mark.parametrize(
    ("desk", "text", "whole"),
    [
        ("research", "could you research heat pumps for me please,", True),
        ("research", "What are solar panels,", True),
        ("research", "research solar panels", True),  # whole as it stands
        ("research", "Research solar panels...", False),  # the caller trails off
        ("drafting", "please write a note about electric cars", True),
        ("report", "could you write a report about batteries", True),
        ("triage", "My internet is not working,", True),  # a handoff rule of another agent
        ("triage", "My robber,", False),  # misheard: no rule takes it
        ("triage", "The phone-line tears,", False),
        ("triage", "my router", False),
    ],
)
def test_the_example_desks_tell_words_that_make_a_whole_request(
    desk: str, text: str, whole: bool
) -> None:
    assert desk_words_complete(load_desks(CHANNELS)[desk])(text) is whole


def test_a_catch_all_rule_makes_no_request_whole() -> None:
    from voicehub.agents.scripted import ScriptedLLM

    llm = ScriptedLLM(
        [{"match": ["library"], "say": "It opens at nine."}, {"match": ["*"], "say": "?"}]
    )
    assert llm.takes("Tell me the opening hours of the library,")
    assert not llm.takes("my robber")  # only the catch-all matches it
    assert not llm.takes("tell me the opening hours of the librery")  # no tolerant pass
