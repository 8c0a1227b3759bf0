"""No module of voicehub awaits through `asyncio.wait_for`.

On Python 3.11 (which voicehub supports) `asyncio.wait_for` runs the awaited thing as a
separate task and, when a cancellation of the waiter arrives as that task finishes, returns
the result and drops the cancellation: Ctrl-C during `voicehub call`'s connect was lost and
the call ran on for its whole timeout. `async with asyncio.timeout(...)` awaits in the same
task and always delivers it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "voicehub"


def test_no_module_uses_asyncio_wait_for() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "wait_for"
                and isinstance(node.value, ast.Name)
                and node.value.id == "asyncio"
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, "use `async with asyncio.timeout(...)` instead: " + ", ".join(found)
