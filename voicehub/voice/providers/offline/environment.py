"""Settings of the offline recognizers read from the environment (how many decoders,
processes, threads): whole numbers of 1 or more, with a clear error for anything else."""

from __future__ import annotations

import os

from voicehub.errors import ConfigError

__all__ = ["whole_number"]


def whole_number(name: str, default: int) -> int:
    """`$name` as a whole number of 1 or more, `default` when unset or blank (ConfigError
    naming the variable otherwise)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name}={raw!r}: expected a whole number, 1 or more")
    return value
