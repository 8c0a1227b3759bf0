"""Reading the TOML files a user writes (desks, knowledge, agent directories, workflows):
every way reading can fail becomes one ConfigError that names the file."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from voicehub.core.validation import describe_errors
from voicehub.errors import ConfigError

__all__ = ["invalid_file", "read_toml"]


def read_toml(path: Path, kind: str = "file") -> dict[str, Any]:
    """The tables of the TOML file at `path`; `kind` ("desk file") names it in errors."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: {kind} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the {kind}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:  # the message carries line and column
        raise ConfigError(f"{path}: TOML syntax error: {exc}") from None


def invalid_file(path: Path, exc: ValidationError, *, at: Sequence[int | str] = ()) -> ConfigError:
    """The error for a file whose contents failed validation: `file: field.path: message`
    per problem, one a line. `at` is where the validated table sits in the file."""
    return ConfigError("\n".join(f"{path}: {line}" for line in describe_errors(exc, at=at)))
