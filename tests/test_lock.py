"""The lock agrees with pyproject.toml: every requirement the development install and the
image ask for is pinned, with hashes, to a version its range allows, on every platform the
lock covers. A range changed without `make lock` fails here, naming the package and the fix.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
FIX = "run `make lock` and commit pyproject.toml with locks/"

# The platforms the lock is resolved for (docs/development.md).
ENVIRONMENTS = [
    {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    for python in ("3.11", "3.12", "3.13")
    for machine in ("x86_64", "aarch64")
]


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: int

    def applies(self, environment: dict[str, str]) -> bool:
        return self.marker is None or self.marker.evaluate(environment)


def read_lock(path: Path) -> list[Pin]:
    """The pins of a `uv pip compile --generate-hashes` file."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    pins = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        hashes = line.count("--hash=sha256:")
        requirement = Requirement(line.split(" --hash", 1)[0])
        [specifier] = list(requirement.specifier)
        assert specifier.operator == "==", f"{path.name}: {line!r} is not an exact pin"
        pins.append(
            Pin(
                canonicalize_name(requirement.name),
                Version(specifier.version),
                requirement.marker,
                hashes,
            )
        )
    return pins


def _project(path: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads(path.read_text())["project"]
    return project


def _inputs(lock_input: Path) -> Iterator[tuple[Requirement, set[str]]]:
    """The requirements a lock input (`locks/*.in`) asks for, each with the extras it is
    asked under: this repo's projects expanded into their dependencies."""
    projects = {
        ".": _project(ROOT / "pyproject.toml"),
        "./devtools": _project(ROOT / "devtools" / "pyproject.toml"),
    }
    for raw in lock_input.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-e "):
            path, _, extras = line[3:].partition("[")
            yield from _project_requirements(projects, path, set(extras.rstrip("]").split(",")))
        else:
            yield Requirement(line), set()


def _project_requirements(
    projects: dict[str, dict[str, object]], path: str, extras: set[str]
) -> Iterator[tuple[Requirement, set[str]]]:
    project = projects[path]
    optional: dict[str, list[str]] = project.get("optional-dependencies", {})  # type: ignore[assignment]
    base: list[str] = project.get("dependencies", [])  # type: ignore[assignment]
    for extra in sorted(extras - {""}):
        assert extra in optional, f"locks: {path} has no extra {extra!r}"
    for text in [*base, *(r for e in sorted(extras - {""}) for r in optional[e])]:
        requirement = Requirement(text)
        if canonicalize_name(requirement.name) == "voicehub":  # this repo's own project
            yield from _project_requirements(projects, ".", set(requirement.extras))
        else:
            yield requirement, extras


def _problems(lock: Path, lock_input: Path) -> Iterator[str]:
    pins = read_lock(lock)
    for pin in pins:
        if pin.hashes == 0:
            yield f"{lock.name}: {pin.name}=={pin.version} has no hash"
    for environment in ENVIRONMENTS:
        where = f"Python {environment['python_version']} on {environment['platform_machine']}"
        for requirement, extras in _inputs(lock_input):
            applies = requirement.marker is None or any(
                requirement.marker.evaluate({**environment, "extra": extra})
                for extra in extras or {""}
            )
            if not applies:
                continue
            name = canonicalize_name(requirement.name)
            chosen = [pin for pin in pins if pin.name == name and pin.applies(environment)]
            if len(chosen) != 1:
                yield f"{lock.name}: {requirement} is not pinned for {where}"
            elif not requirement.specifier.contains(chosen[0].version, prereleases=True):
                version = chosen[0].version
                yield f"{lock.name}: {name}=={version} is outside {requirement} ({where})"


@pytest.mark.parametrize("name", ["dev", "deploy", "uv"])
def test_the_lock_pins_every_requirement_within_its_range(name: str) -> None:
    problems = sorted(set(_problems(ROOT / "locks" / f"{name}.txt", ROOT / "locks" / f"{name}.in")))
    assert not problems, "\n".join([*problems, FIX])


def test_the_image_gets_the_versions_the_tests_ran() -> None:
    dev = {(pin.name, str(pin.marker)): pin.version for pin in read_lock(ROOT / "locks/dev.txt")}
    for pin in read_lock(ROOT / "locks" / "deploy.txt"):
        if not any(pin.applies(environment) for environment in ENVIRONMENTS):
            continue  # overridden away (locks/overrides.txt): installed on no platform
        assert dev.get((pin.name, str(pin.marker))) == pin.version, (
            f"deploy.txt pins {pin.name}=={pin.version}, dev.txt does not: {FIX}"
        )


def test_a_range_the_lock_does_not_satisfy_is_caught(tmp_path: Path) -> None:
    lock = tmp_path / "dev.txt"
    lock.write_text("pydantic==1.10.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    lock_input = tmp_path / "dev.in"
    lock_input.write_text("pydantic>=2.7\nnumpy\n")
    problems = set(_problems(lock, lock_input))
    assert "dev.txt: pydantic==1.10.0 is outside pydantic>=2.7 (Python 3.11 on x86_64)" in problems
    assert "dev.txt: numpy is not pinned for Python 3.13 on aarch64" in problems
