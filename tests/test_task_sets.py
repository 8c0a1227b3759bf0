"""The tasks an object starts and does not await are held by `voicehub.core.jobs.TaskSet`
(or `BackgroundJobs`, where they are kept by room), not by a hand-written set.

`tasks.add(task); task.add_done_callback(tasks.discard)` written in place holds the task
but drops its failure silently, and each copy grows its own cancel-and-gather close: the
idiom was written out in 22 modules. This test finds a done callback that discards a task
from a set (`add_done_callback(x.discard)`, a lambda calling `discard`, or a function of the
module that does) anywhere in voicehub/ but core/jobs.py, where TaskSet and BackgroundJobs
write it once. An owner whose tasks fail as a matter of course passes `failed`.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from voicehub.core.jobs import TaskSet

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "voicehub"
HOME = Path("voicehub/core/jobs.py")

# Modules allowed a hand-written copy for a while (none now); each entry must still hold one
# (the test fails on an entry left behind after its copy went).
NOT_YET: dict[Path, str] = {}


def _calls_discard(node: ast.AST) -> bool:
    return any(
        isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "discard"
        for inner in ast.walk(node)
    )


def _discards(node: ast.expr, discarding: set[str]) -> bool:
    """Whether a done callback `node` discards the task from a collection (`discarding`:
    the module's functions that do)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "discard" or node.attr in discarding
    if isinstance(node, ast.Name):
        return node.id in discarding
    return isinstance(node, ast.Lambda) and _calls_discard(node.body)


def hand_written_task_sets(source: str, filename: str = "<source>") -> list[int]:
    """The lines of `source` where a done callback discards its task from a set."""
    tree = ast.parse(source, filename)
    discarding = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _calls_discard(node)
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_done_callback"
        and node.args
        and _discards(node.args[0], discarding)
    ]


def test_the_finder_sees_the_idiom_and_nothing_else() -> None:
    source = """
tasks.add(task)
task.add_done_callback(tasks.discard)
job.add_done_callback(lambda done: self._jobs.discard(done))
job.add_done_callback(lambda _: self._jobs.pop(room_id, None))
run.add_done_callback(self._resolve)
report.add_done_callback(self._report_done)

def _report_done(self, report):
    self._reports.discard(report)
"""
    assert hand_written_task_sets(source) == [3, 4, 7]


async def test_a_task_set_hands_failures_to_its_owner_when_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors: list[BaseException] = []
    tasks = TaskSet("key presses", failed=errors.append)

    async def fail() -> None:
        raise ValueError("the call ended")

    with caplog.at_level(logging.ERROR, logger="voicehub.background"):
        tasks.start(fail())
        await tasks.wait()
    assert [str(error) for error in errors] == ["the call ended"]
    assert not caplog.records  # not logged as a failure: the owner said what it means
    assert len(tasks) == 0


def test_no_module_holds_its_tasks_in_a_hand_written_set() -> None:
    found: dict[Path, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(ROOT)
        if where != HOME and (lines := hand_written_task_sets(path.read_text(), str(path))):
            found[where] = lines
    written = {
        f"{where}:{line}"
        for where, lines in found.items()
        if where not in NOT_YET
        for line in lines
    }
    assert not written, "hold the tasks in a voicehub.core.jobs.TaskSet: " + ", ".join(
        sorted(written)
    )
    gone = sorted(str(where) for where in NOT_YET if where not in found)
    assert not gone, "no copy left here, take it out of NOT_YET: " + ", ".join(gone)
