"""The one ValidationError formatter and the one TOML reader every config file goes through."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from voicehub.core.toml_files import invalid_file, read_toml
from voicehub.core.validation import describe_errors
from voicehub.errors import ConfigError


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    regex: str
    weight: int = Field(default=1, ge=0)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        if value == "(":
            raise ValueError("missing )")
        if value == "deep":
            raise PydanticCustomError("sub", "{message}", {"path": "group", "message": "no"})
        return value


class Agent(BaseModel):
    rules: list[Rule]


def _errors(data: object, **options: object) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Agent.model_validate(data)
    return describe_errors(caught.value, **options)  # type: ignore[arg-type]


def test_each_problem_names_its_field_path() -> None:
    data = {"rules": [{"regex": "a"}, {"regex": "(", "weight": -2, "sya": 1}]}
    assert _errors(data, at=("agents", 1)) == [
        "agents[1].rules[1].regex: missing )",
        "agents[1].rules[1].weight: Input should be greater than or equal to 0 (got -2)",
        "agents[1].rules[1].sya: unknown field (check the spelling)",
    ]


def test_missing_fields_the_root_and_paths_below_a_field() -> None:
    assert _errors({"rules": [{}]}) == ["rules[0].regex: required field is missing"]
    assert _errors([], root="arguments") == [
        "arguments: Input should be a valid dictionary or instance of Agent"
    ]
    assert _errors({"rules": [{"regex": "deep"}]}) == ["rules[0].regex.group: no"]


def test_reading_names_the_file_and_what_went_wrong(tmp_path: Path) -> None:
    path = tmp_path / "desk.toml"
    with pytest.raises(ConfigError, match=r"desk\.toml: desk file not found$"):
        read_toml(path, "desk file")
    path.write_text("name = = 1\n")
    with pytest.raises(ConfigError, match=r"desk\.toml: TOML syntax error: .*line 1"):
        read_toml(path)
    path.write_bytes(b"name = '\xff'")
    with pytest.raises(ConfigError, match=r"desk\.toml: cannot read the file: .*utf-8"):
        read_toml(path)
    path.write_text("[[rules]]\nregex = '('\n")
    with pytest.raises(ValidationError) as caught:
        Agent.model_validate(read_toml(path))
    assert str(invalid_file(path, caught.value)) == f"{path}: rules[0].regex: missing )"
