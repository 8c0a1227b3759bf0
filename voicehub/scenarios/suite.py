"""`voicehub test`: load scenario files, run each scenario against its desk, check it.

Scenarios run one after another (each a conversation of its own), against a server at
`url`, or against the desks served in this process (`local_server`) when there is none.
Every file is loaded and checked before the first call, so a broken file fails at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from voicehub.desks.desk import Desk, load_desks
from voicehub.errors import ConfigError
from voicehub.scenarios.checks import Failure, check_run
from voicehub.scenarios.judge import SKIPPED_NOTE, JudgeSettings, judge
from voicehub.scenarios.loading import ScenarioSource, find_scenario_files, load_scenarios
from voicehub.scenarios.model import Scenario
from voicehub.scenarios.runner import ScenarioRun, Target, run_scenario

__all__ = ["ScenarioResult", "load_suite", "run_suite"]


@dataclass
class ScenarioResult:
    """How one scenario went."""

    source: Path
    desk: str
    name: str
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: str = ""
    skipped: str | None = None  # why it did not run

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class _Folder:
    desks: dict[str, Desk]
    sources: list[ScenarioSource]


def load_suite(targets: Sequence[Path], desk_folder: Path | None = None) -> dict[Path, _Folder]:
    """Every scenario file of `targets`, checked against the desks beside it (or in
    `desk_folder`), by desk folder. ConfigError lists every problem of every file."""
    folders: dict[Path, _Folder] = {}
    problems: list[str] = []
    for path, beside in find_scenario_files(targets):
        desk_folder = desk_folder or beside
        if desk_folder not in folders:
            folders[desk_folder] = _Folder(load_desks(desk_folder), [])
        folder = folders[desk_folder]
        try:
            folder.sources.append(load_scenarios(path, folder.desks))
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("\n".join(problems))
    return folders


async def run_suite(
    targets: Sequence[Path],
    *,
    url: str | None = None,
    token: str | None = None,
    only: str | None = None,
    judge_settings: JudgeSettings | None = None,
    progress: Callable[[ScenarioResult], None] | None = None,
    jobs: int = 1,
    desk_folder: Path | None = None,
) -> list[ScenarioResult]:
    """Run the scenarios of `targets` (those whose name matches the glob `only`), `jobs`
    at a time (each is a conversation of its own), in file order in the results."""
    folders = load_suite(targets, desk_folder)
    results: list[ScenarioResult] = []
    slots = asyncio.Semaphore(max(1, jobs))

    async def one(source: ScenarioSource, scenario: Scenario, target: Target) -> ScenarioResult:
        missing = [name for name in scenario.requires_env if not os.environ.get(name)]
        if missing:
            result = ScenarioResult(source.path, source.file.desk, scenario.name)
            result.skipped = f"needs {', '.join(missing)} (requires_env)"
        else:
            async with slots:
                run = await run_scenario(scenario, source.file.desk, target)
            result = await _result(source, run, judge_settings)
        if progress is not None:
            progress(result)
        return result

    for folder_path, folder in folders.items():
        chosen = [
            (source, scenario)
            for source in folder.sources
            for scenario in source.file.scenario
            if only is None or fnmatch.fnmatch(scenario.name, only)
        ]
        if not chosen:
            continue
        async with _server(folder_path, url) as base:
            target = Target(base, token)
            results += await asyncio.gather(*(one(s, sc, target) for s, sc in chosen))
    return results


@contextlib.asynccontextmanager
async def _server(desk_folder: Path, url: str | None) -> AsyncIterator[str]:
    if url is not None:
        yield url
        return
    from voicehub.scenarios.local_server import serving

    async with serving(desk_folder) as base:
        yield base


async def _result(
    source: ScenarioSource, run: ScenarioRun, judge_settings: JudgeSettings | None
) -> ScenarioResult:
    from voicehub.scenarios.judge import transcript

    result = ScenarioResult(
        source.path,
        run.desk,
        run.scenario.name,
        seconds=run.seconds,
        failures=check_run(run),
        timeline=transcript(run),
    )
    rubric = run.scenario.expect.judge
    if rubric is not None:
        if judge_settings is None:
            result.notes.append(SKIPPED_NOTE)
        else:
            try:
                verdict = await judge(run, rubric, judge_settings)
            except Exception as exc:  # the judge's server is a dependency of the verdict
                result.failures.append(
                    Failure("judge", "a verdict", f"{type(exc).__name__}: {exc}")
                )
            else:
                if not verdict.passed:
                    result.failures.append(Failure("judge", rubric, verdict.reason))
                else:
                    result.notes.append(f"judge: passed ({verdict.reason})")
    return result
