"""Settings from the environment with command-line flags on top, one way for every command.

`voicehub serve` and `voicehub worker` both read `VOICEHUB_*` (and vendor) variables, let
flags override them and report a bad value under the variable that held it: the reading is
here, each command keeps only its model and its table of variables.

The environment is read by hand rather than with pydantic-settings: a `BaseSettings` model
reads the environment every time one is constructed (tests build settings that must not pick
up a developer's `VOICEHUB_TOKEN`), some variables are not named after their fields
(`VOICEHUB_CHANNELS`, `VOICEHUB_DB`, `LIVEKIT_URL`), and its errors name the field, not the
variable that held the bad value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from voicehub.core.validation import describe_errors
from voicehub.errors import ConfigError

__all__ = ["settings_from_env", "validated_settings"]

Settings = TypeVar("Settings", bound=BaseModel)


def settings_from_env(
    model: type[Settings],
    variables: Mapping[str, str],
    overrides: Mapping[str, Any],
    *,
    what: str,
) -> Settings:
    """`model` from the `variables` (field -> variable; unset or empty: the default), then
    `overrides` (None values are ignored). ConfigError names the variable of a bad value."""
    given = {key: value for key, value in overrides.items() if value is not None}
    found = {
        field: name
        for field, name in variables.items()
        if os.environ.get(name) and field not in given
    }
    values = {field: os.environ[name] for field, name in found.items()}
    return validated_settings(model, {**values, **given}, found, what=what)


def validated_settings(
    model: type[Settings],
    values: Mapping[str, Any],
    sources: Mapping[str, str] | None = None,
    *,
    what: str,
) -> Settings:
    """`model(**values)`, or ConfigError ("invalid {what} settings: ...") with one line per
    problem, each under the variable it came from (`sources`: field -> variable)."""
    try:
        return model(**values)
    except ValidationError as exc:
        lines = [_from_source(line, sources or {}) for line in describe_errors(exc)]
        raise ConfigError(f"invalid {what} settings:\n  " + "\n  ".join(lines)) from None


def _from_source(line: str, sources: Mapping[str, str]) -> str:
    """`port: ...` -> `VOICEHUB_PORT: ...` when the port came from the environment."""
    field, message = line.split(": ", 1)
    top = field.split("[", 1)[0].split(".", 1)[0]  # `ice_servers[0].urls` came from one variable
    if top in sources:
        field = sources[top] + field[len(top) :]
    return f"{field}: {message}"
