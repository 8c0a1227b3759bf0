"""Which line of a desk file a field path points at, to say `research.toml:42:` in errors.

Validation names a field by its path (`agents[1].scripted.rules[0].regex`); an editor wants
a line. `line_of` walks the file's table headers (`[voice]`, `[[agents]]`,
`[[agents.scripted.rules]]`, counting array tables) and `key =` lines, and answers the line
of the key the path names, else the line of the deepest table on the path (a missing key is
reported at its table's header), else None. Keys inside inline tables and arrays
(`arguments = { ... }`, `stages = [ ... ]`) are found at the line of their outer key.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["line_of", "with_lines"]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*(\"[^\"]+\"|[A-Za-z0-9_\-]+)\s*=")
_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")

Step = tuple[str, int | None]


def line_of(text: str, path: str) -> int | None:
    """The 1-based line of the field `path` in the TOML `text` (see the module)."""
    wanted = _steps(path)
    if not wanted:
        return None
    best: tuple[int, int] | None = None  # (steps matched, line)
    table: list[Step] = []
    counts: dict[tuple[Step, ...], int] = {}
    in_multiline = False
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            in_multiline = line.count('"""') % 2 == 0 and line.count("'''") % 2 == 0
            continue
        header = _HEADER.match(line)
        if header is not None:
            table = _table_path(header.group(2), header.group(1) == "[[", table, counts)
            best = _better(best, _matched(table, wanted), number)
            continue
        key = _KEY.match(line)
        if key is None:
            continue
        if line.count('"""') % 2 == 1 or line.count("'''") % 2 == 1:
            in_multiline = True
        full = [*table, (key.group(1).strip('"'), None)]
        best = _better(best, _matched(full, wanted), number)
    return best[1] if best is not None and best[0] > 0 else None


def with_lines(message: str) -> str:
    """Each `file: field.path: message` line of an error with the field's line number
    (`file:42: field.path: message`), where it can be found. Each line's own file is read:
    a desk's error may name another file (a desk that a `[manager]` reaches)."""
    lines = []
    texts: dict[str, str | None] = {}
    for entry in message.splitlines():
        found = re.match(r"^(.+?\.toml): ([\w\[\].\-]+): (.*)$", entry)
        if found is not None and found.group(1) not in texts:
            texts[found.group(1)] = _read(found.group(1))
        text = texts.get(found.group(1)) if found is not None else None
        number = line_of(text, found.group(2)) if found is not None and text else None
        if found is None or number is None:
            lines.append(entry)
        else:
            lines.append(f"{found.group(1)}:{number}: {found.group(2)}: {found.group(3)}")
    return "\n".join(lines)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _steps(path: str) -> list[Step]:
    steps: list[Step] = []
    for name, index in _PART.findall(path):
        if name:
            steps.append((name, None))
        elif steps:
            steps[-1] = (steps[-1][0], int(index))
    return steps


def _table_path(
    dotted: str, is_array: bool, current: list[Step], counts: dict[tuple[Step, ...], int]
) -> list[Step]:
    names = [part.strip().strip('"') for part in dotted.split(".")]
    path: list[Step] = []
    for depth, name in enumerate(names):
        last = depth == len(names) - 1
        if last and is_array:
            key = (*path, (name, None))
            counts[key] = counts.get(key, -1) + 1
            path.append((name, counts[key]))
            continue
        # an outer array table keeps the index of its latest element
        previous = current[depth] if depth < len(current) else None
        index = previous[1] if previous is not None and previous[0] == name else None
        path.append((name, index))
    return path


def _matched(found: list[Step], wanted: list[Step]) -> int:
    """How many leading steps of `wanted` the table or key `found` is; 0 unless all of
    `found` lies on the path."""
    if len(found) > len(wanted):
        return 0
    for (name, index), (want_name, want_index) in zip(found, wanted, strict=False):
        if name != want_name or (index is not None and index != want_index):
            return 0
    return len(found)


def _better(best: tuple[int, int] | None, matched: int, number: int) -> tuple[int, int] | None:
    if matched and (best is None or matched > best[0]):
        return (matched, number)
    return best
