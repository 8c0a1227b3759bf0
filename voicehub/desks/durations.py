"""Durations as desk files write them: "24h", "90m", "1h30m", "45s", "2d", or seconds."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

__all__ = ["Duration", "parse_duration"]

_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_SECONDS = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: Any) -> Any:
    """Seconds for "1h30m"-style text (days, hours, minutes, seconds, in that order); numbers
    pass through; anything else raises ValueError naming the form."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower().replace(" ", "")
    parts = _PART.findall(text)
    units = [unit for _, unit in parts]
    if (
        not parts
        or "".join(f"{n}{u}" for n, u in parts) != text
        or units != sorted(set(units), key="dhms".index)
    ):
        raise ValueError(
            f"{value!r} is not a duration: write it like 24h, 90m, 1h30m, 45s or 2d "
            "(or a number of seconds)"
        )
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


Duration = Annotated[
    float, BeforeValidator(parse_duration), Field(gt=0, le=30 * 86_400.0, allow_inf_nan=False)
]
"""A positive duration of at most 30 days, in seconds."""
