"""Every `voicehub.*` (and `voicehub_dev.*`) name the docs and the docstrings mention is a
module, class, function or attribute that exists: a rename or a move that leaves a stale
reference behind fails here, naming where it is written."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"(?<![\w/.-])voicehub(?:_dev)?(?:\.[A-Za-z_][A-Za-z0-9_]*)+")

# Dotted names that are not Python objects, and what they are instead.
NOT_OBJECTS = {
    "voicehub.commands": "the entry point group of `voicehub` subcommands",
    "voicehub.voice_stacks": "the entry point group of voice stacks",
    "voicehub.twilio_account": "the entry point of the Twilio account emulator",
    "voicehub.result": "a webhook payload's type",
}
NOT_OBJECT_PREFIXES = ("voicehub.turn.",)  # span attributes of a turn
HISTORY = {Path("docs/changelog.md")}  # names as they were then


def _texts() -> Iterator[tuple[str, str]]:
    """(where, text): the README, every docs page, every docstring of the code."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if path.relative_to(ROOT) not in HISTORY:
            yield str(path.relative_to(ROOT)), path.read_text()
    for package in (ROOT / "voicehub", ROOT / "devtools" / "voicehub_dev"):
        for path in sorted(package.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    doc = ast.get_docstring(node, clean=False)
                    if doc:
                        line = getattr(node, "lineno", 1)
                        yield f"{path.relative_to(ROOT)}:{line}", doc


def _has(owner: object, name: str) -> bool:
    if hasattr(owner, name):
        return True
    fields = getattr(owner, "model_fields", None)  # a pydantic model's fields
    if isinstance(fields, dict) and name in fields:
        return True
    return (
        isinstance(owner, type)
        and dataclasses.is_dataclass(owner)
        and any(f.name == name for f in dataclasses.fields(owner))
    )


def unresolved(name: str) -> str | None:
    """Why `name` names nothing (None: it resolves)."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for index in range(split, len(parts)):
            if not _has(owner, parts[index]):
                return f"{'.'.join(parts[:index])} has no {parts[index]!r}"
            owner = getattr(owner, parts[index], None)
        return None
    return f"no module {parts[0]}"


@pytest.mark.slow
def test_every_voicehub_name_in_the_docs_and_docstrings_resolves() -> None:
    found: dict[str, set[str]] = {}
    for where, text in _texts():
        for match in NAME.finditer(text):
            found.setdefault(match.group(0).rstrip("."), set()).add(where)
    assert len(found) > 100  # the scan reads what it should
    stale = [
        f"{name} ({problem}), in {', '.join(sorted(found[name]))}"
        for name in sorted(found)
        if name not in NOT_OBJECTS
        and not name.startswith(NOT_OBJECT_PREFIXES)
        and (problem := unresolved(name)) is not None
    ]
    assert not stale, "stale names:\n" + "\n".join(stale)


def test_a_stale_name_is_told_from_a_real_one() -> None:
    assert unresolved("voicehub.hub.Hub.release_room") is None
    assert unresolved("voicehub.desks.sections.VoiceConfig.stack") is None  # a pydantic field
    assert unresolved("voicehub.desks.voice_stack.CallSpec.reopened") is None  # a dataclass's
    assert unresolved("voicehub.voice.delivery_speech") == "voicehub.voice has no 'delivery_speech'"
    assert unresolved("voicehub.hub.Hub.no_such") == "voicehub.hub.Hub has no 'no_such'"
