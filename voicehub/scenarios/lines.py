"""Where a key sits in a TOML file, so an error names the line (`tomllib` keeps none).

`key_lines(text)` reads the file's table headers and `key = value` lines and maps each
path (`("scenario", 0, "steps", 2, "expect_tool")`) to its line number; `line_of(path)`
finds the line of the longest known prefix of a path (a key inside an inline table is on
its table's line). It knows what scenario files use: `[table]`, `[[array]]`, bare, quoted
and dotted keys; it is no full TOML parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["KeyLines", "key_lines"]

Path = tuple[str | int, ...]
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_NAME = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^\s*({_NAME}(?:\s*\.\s*{_NAME})*)\s*=")
_DOT = re.compile(r"""\.(?=(?:[^"']*["'][^"']*["'])*[^"']*$)""")  # a dot outside quotes


def _parts(dotted: str) -> list[str]:
    return [part.strip().strip("\"'") for part in _DOT.split(dotted)]


class KeyLines:
    """Line numbers (1-based) of the paths found in one TOML text."""

    def __init__(self, lines: dict[Path, int]) -> None:
        self.lines = lines

    def line_of(self, path: Sequence[str | int]) -> int | None:
        for end in range(len(path), 0, -1):
            found = self.lines.get(tuple(path[:end]))
            if found is not None:
                return found
        return None


def key_lines(text: str) -> KeyLines:
    lines: dict[Path, int] = {}
    counts: dict[Path, int] = {}  # array-of-tables path (with the indices above it) -> count
    current: Path = ()
    in_multiline = False
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            in_multiline = line.count('"""') % 2 == 0 and line.count("'''") % 2 == 0
            continue
        header = _HEADER.match(line)
        if header is not None:
            names = _parts(header.group(2))
            path: Path = ()
            for i, name in enumerate(names):
                path = (*path, name)
                # an array met earlier on the way down: its last element
                if i < len(names) - 1 and path in counts:
                    path = (*path, counts[path] - 1)
            if header.group(1) == "[[":
                index = counts.get(path, 0)
                counts[path] = index + 1
                lines.setdefault(path, number)
                path = (*path, index)
            lines[path] = number
            current = path
            continue
        key = _KEY.match(line)
        if key is not None:
            lines[(*current, *_parts(key.group(1)))] = number
            rest = line[key.end() :]
            if rest.count('"""') == 1 or rest.count("'''") == 1:
                in_multiline = True
    return KeyLines(lines)
