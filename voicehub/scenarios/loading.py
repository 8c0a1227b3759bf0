"""Reading scenario files: validated, checked against their desk, errors with file and line.

Scenario files live in a `scenarios/` folder beside the desk files (`channels/scenarios/
research.toml` calls the desks of `channels/`). A file with an unknown key, a step that is
not one action, a desk that is not there, or an expectation naming a tool or agent the desk
does not have fails with `file:line`, what is wrong, and the valid names.
"""

from __future__ import annotations

import tomllib
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from voicehub.desks.config import model_tool_names
from voicehub.errors import ConfigError
from voicehub.scenarios.lines import KeyLines, key_lines
from voicehub.scenarios.model import ScenarioFile

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk

__all__ = ["ScenarioSource", "desk_tools", "find_scenario_files", "load_scenarios"]

SCENARIO_FOLDER = "scenarios"


@dataclass(frozen=True)
class ScenarioSource:
    """One loaded scenario file."""

    path: Path
    file: ScenarioFile
    lines: KeyLines

    def line(self, *path: str | int) -> str:
        """`file:line` of a key, for messages."""
        found = self.lines.line_of(path)
        return f"{self.path}:{found}" if found is not None else str(self.path)


def find_scenario_files(targets: Sequence[Path]) -> list[tuple[Path, Path]]:
    """(scenario file, desk folder) for each target: a desk folder (its `scenarios/`), a
    scenarios folder, or one file. ConfigError when a target holds none."""
    found: list[tuple[Path, Path]] = []
    for target in targets:
        if target.is_file():
            found.append((target, _desk_folder(target.parent)))
            continue
        if not target.is_dir():
            raise ConfigError(f"{target}: no such scenario file or folder")
        folder = target / SCENARIO_FOLDER if (target / SCENARIO_FOLDER).is_dir() else target
        files = sorted(folder.glob("*.toml"))
        if not files:
            raise ConfigError(
                f"{target}: no scenario files (*.toml in {folder}); write them in a "
                f"`{SCENARIO_FOLDER}/` folder beside the desk files (docs/scenarios.md)"
            )
        found += [(path, _desk_folder(folder)) for path in files]
    return found


def _desk_folder(folder: Path) -> Path:
    return folder.parent if folder.name == SCENARIO_FOLDER else folder


def load_scenarios(path: Path, desks: Mapping[str, Desk]) -> ScenarioSource:
    """Read and check one scenario file against `desks`; ConfigError lists every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the scenario file: {exc.strerror}") from None
    lines = key_lines(text)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        parsed = ScenarioFile.model_validate(raw)
    except ValidationError as exc:
        problems = [_problem(path, lines, error) for error in exc.errors()]
        raise ConfigError("\n".join(dict.fromkeys(problems))) from None
    source = ScenarioSource(path, parsed, lines)
    problems = list(_desk_problems(source, desks))
    if problems:
        raise ConfigError("\n".join(problems))
    return source


def _problem(path: Path, lines: KeyLines, error: Any) -> str:
    loc = tuple(error["loc"])
    line = lines.line_of(loc)
    where = f"{path}:{line}" if line is not None else str(path)
    if error["type"] == "extra_forbidden":
        within = _keys(loc[:-1])
        valid = ", ".join(_fields_at(within))
        return (
            f"{where}: {_dotted(within) or 'top level'}: unknown key {loc[-1]!r}; "
            f"valid keys: {valid}"
        )
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {_dotted(_keys(loc)) or 'top level'}: {message}"


def _keys(loc: Sequence[Any]) -> list[str | int]:
    """A pydantic error location without the union members' tags."""
    return [part for part in loc if isinstance(part, int) or part in _ALL_FIELDS]


def _dotted(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _model_fields(model: type[BaseModel]) -> Iterator[tuple[str, Any]]:
    for name, info in model.model_fields.items():
        yield name, info.annotation


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through unions, lists, optionals)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _fields_at(path: Sequence[str | int]) -> list[str]:
    """The keys valid at `path` of a scenario file."""
    model: type[BaseModel] = ScenarioFile
    for part in path:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _models_in(field.annotation) if field is not None else []
        if not inner:
            break
        model = inner[0]
    return sorted(model.model_fields)


def _collect_fields(model: type[BaseModel], seen: set[str]) -> set[str]:
    for name, annotation in _model_fields(model):
        seen.add(name)
        for inner in _models_in(annotation):
            _collect_fields(inner, seen)
    return seen


_ALL_FIELDS = _collect_fields(ScenarioFile, set())


def desk_tools(desk: Desk) -> list[str]:
    """Every tool an agent of `desk` may call (its own, an MCP tool under the name the model
    sees, and what its orchestration adds)."""
    names: set[str] = set()
    for agent in desk.config.agents:
        names.update(model_tool_names(agent.tools))
        names.update(desk.config.orchestration_tools(agent.id))
    return sorted(names)


def _desk_problems(source: ScenarioSource, desks: Mapping[str, Desk]) -> Iterator[str]:
    name = source.file.desk
    desk = desks.get(name)
    if desk is None:
        known = ", ".join(sorted(desks)) or "none"
        yield f"{source.line('desk')}: desk: unknown desk {name!r}; desks here: {known}"
        return
    tools = desk_tools(desk)
    agents = sorted(agent.id for agent in desk.config.agents)
    for i, scenario in enumerate(source.file.scenario):
        for j, step in enumerate(scenario.steps):
            for expected in step.tools:
                if expected.name not in tools:
                    where = source.line("scenario", i, "steps", j, "expect_tool")
                    yield (
                        f"{where}: scenario[{i}].steps[{j}].expect_tool: {expected.name!r} is "
                        f"no tool of desk {name!r}; its tools: {', '.join(tools) or 'none'}"
                    )
            if step.expect_handoff is not None and step.expect_handoff not in agents:
                where = source.line("scenario", i, "steps", j, "expect_handoff")
                yield (
                    f"{where}: scenario[{i}].steps[{j}].expect_handoff: {step.expect_handoff!r} "
                    f"is no agent of desk {name!r}; its agents: {', '.join(agents)}"
                )
