"""One way to tell a user what failed pydantic validation: a `field.path: message` line per
problem, e.g. `agents[1].scripted.rules[0].regex: ...`.

Pydantic's messages are kept, with the few that read badly to a person reworded: a missing
field says so, an unknown key says to check its spelling, and a rejected scalar shows the
value that was given. An error raised with `ctx={"path": ..., "message": ...}` (see
`voicehub.desks.sections.field_error`) names a field below the model that raised it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

__all__ = ["describe_errors", "field_path"]


def describe_errors(
    exc: ValidationError,
    *,
    at: Sequence[int | str] = (),
    root: str = "(top level)",
    strip: int = 0,
) -> list[str]:
    """One `field.path: message` line per error in `exc`.

    `at` is where the validated value sits in a bigger document (its path is put first);
    `root` names the value itself when an error is about the whole of it; `strip` drops
    that many leading parts of each location (a tagged union's tag, say).
    """
    lines = []
    errors = exc.errors()
    for error in errors:
        kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
        if kind == "too_short" and _has_error_below(error["loc"], errors):
            continue  # a list short only because an item failed: the item's error says it
        where = field_path((*at, *error["loc"][strip:]))
        message = error["msg"].removeprefix("Value error, ")
        if isinstance(ctx.get("path"), str) and "message" in ctx:
            where, message = f"{where}.{ctx['path']}".lstrip("."), str(ctx["message"])
        elif kind == "missing":
            message = "required field is missing"
        elif kind == "extra_forbidden":
            message = "unknown field (check the spelling)"
        elif kind != "value_error" and isinstance(value, str | int | float):
            message += f" (got {value!r:.60})"  # bool is an int: shown too
        lines.append(f"{where or root}: {message}")
    return lines


def _has_error_below(loc: Sequence[int | str], errors: Sequence[Any]) -> bool:
    depth = len(loc)
    return any(len(e["loc"]) > depth and tuple(e["loc"][:depth]) == tuple(loc) for e in errors)


def field_path(loc: Sequence[int | str]) -> str:
    """`("agents", 1, "regex")` -> `agents[1].regex`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
