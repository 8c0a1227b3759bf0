"""The desk file's JSON Schema: generated from the models, checked in for TOML editors,
and every example desk validates against it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from voicehub.cli import main
from voicehub.desks.schema import schema_directive, schema_text, undescribed_keys

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
CHECKED_IN = CHANNELS / "desk.schema.json"
EXAMPLES = sorted(CHANNELS.glob("*.toml"))


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(schema_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_checked_in_schema_is_the_one_the_models_make() -> None:
    assert CHECKED_IN.read_text() == schema_text(), (
        "channels/desk.schema.json is stale: run "
        "`voicehub channels --schema channels/desk.schema.json`"
    )


def test_every_key_has_a_meaning() -> None:
    assert undescribed_keys() == [], (
        "add a docstring under each of these fields (voicehub/desks/sections.py and its "
        "neighbours; a scripted rule's keys: RULE_MEANINGS in voicehub/desks/schema.py)"
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_each_example_desk_names_the_schema_and_validates(
    path: Path, validator: Draft202012Validator
) -> None:
    text = path.read_text()
    assert schema_directive(text) == "./desk.schema.json"
    errors = [error.message for error in validator.iter_errors(tomllib.loads(text))]
    assert errors == []


def test_a_wrong_key_and_a_wrong_value_are_reported(validator: Draft202012Validator) -> None:
    desk = tomllib.loads((CHANNELS / "research.toml").read_text())
    desk["greting"] = "hello"
    desk["delivery"]["strategy"] = "whenever"
    found = {tuple(error.absolute_path): error.message for error in validator.iter_errors(desk)}
    assert "'greting' was unexpected" in found[()]
    assert "'whenever' is not one of" in found[("delivery", "strategy")]


def test_the_shorthands_desk_files_use_are_valid(validator: Draft202012Validator) -> None:
    desk = {
        "name": "tiny",
        "agents": [
            {
                "id": "desk",
                "llm": "scripted",
                "scripted": {"rules": [{"match": "hello", "say": "Hi."}]},
            },
            {"id": "cloud", "llm": {"provider": "openai", "model": "gpt-4o-mini"}},
        ],
    }
    assert list(validator.iter_errors(desk)) == []


def test_channels_writes_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "desk.schema.json"
    assert main(["channels", "--schema", str(target)]) == 0
    assert target.read_text() == schema_text()
    assert main(["channels", "--schema"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])["title"] == "voicehub desk file"
