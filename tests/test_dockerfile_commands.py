"""The Dockerfile's own command lines, run (no Docker engine runs here): its `RUN` lines in a
fresh virtual environment laid out as the image is, then its `CMD` and `HEALTHCHECK`. A wrong
flag or an extra that does not exist fails here, not in someone's `docker build`.

How it stands in for the image:
- `/app` and `/data` are folders of a temp dir; `COPY` copies the files the Dockerfile names.
- A fresh venv plays the image's Python. It sees the project venv's installed packages
  through a `.pth` file, so `pip install ".[extras]"` resolves every extra against what
  `make install` put there (fetching only what is missing) and builds voicehub itself from
  the copy: seconds, where a cold install takes minutes. `PIP_NO_CACHE_DIR` is the one
  `ENV` not applied: pip's cache stands in for the image build's network.
- Commands of the base system (`apt-get`, `rm`, `useradd`, `mkdir`, `chown`) are the
  image's own setup and are skipped; every `pip`, `python` and `voicehub` command runs.
- `CMD` serves on 127.0.0.1 and a free port (tests bind nothing else), with the Dockerfile's
  `ENV` and the variables docker-compose.yml gives the `serve` service, less its Redis store
  (a host of the compose network); its health check must pass, and SIGTERM must end it
  with exit code 0.

Needs: pip with its cache from `make install`, or the package index.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import yaml

from voicehub.server.settings import ServerSettings

pytestmark = pytest.mark.pip

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_SETUP = {"useradd", "mkdir", "chown", "apt-get", "rm"}
RUNS = {"pip", "python", "voicehub"}


@dataclass
class Dockerfile:
    """The instructions that matter here, in order."""

    env: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[list[str], str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)


def parse_dockerfile(text: str) -> Dockerfile:
    parsed = Dockerfile()
    logical = re.sub(r"\\\n\s*", " ", text)
    for line in logical.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        if instruction == "ENV":
            parsed.env.update(dict(part.split("=", 1) for part in shlex.split(rest)))
        elif instruction == "COPY":
            *sources, target = shlex.split(rest)
            parsed.copies.append((sources, target))
        elif instruction == "RUN":
            parsed.runs.append(rest)
        elif instruction == "CMD":
            parsed.cmd = json.loads(rest)
        elif instruction == "HEALTHCHECK":
            parsed.healthcheck = json.loads(rest[rest.index("CMD") + 3 :].strip())
    return parsed


@dataclass
class Image:
    """The image's file system and Python, stood in for by a temp dir and a venv."""

    root: Path
    app: Path
    data: Path
    venv: Path
    env: dict[str, str]

    def path(self, text: str) -> str:
        """`text` with the image's /app and /data made this stand-in's folders."""
        text = re.sub(r"(?<![\w/.])/app(?=/|\b)", str(self.app), text)
        return re.sub(r"(?<![\w/.])/data(?=/|\b)", str(self.data), text)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.path(command),
            shell=True,
            cwd=self.app,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def image(dockerfile: Dockerfile, tmp_path_factory: pytest.TempPathFactory) -> Image:
    root = tmp_path_factory.mktemp("image")
    app, data, venv = root / "app", root / "data", root / "venv"
    app.mkdir()
    data.mkdir()
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True, timeout=120)
    [site] = list((venv / "lib").glob("python3.*/site-packages"))
    (site / "project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {
        "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(root)),
        "LANG": "C.UTF-8",
    }
    image = Image(root, app, data, venv, env)
    env.update({k: image.path(v) for k, v in dockerfile.env.items() if k != "PIP_NO_CACHE_DIR"})
    for sources, target in dockerfile.copies:
        destination = app / target if not target.startswith("/") else Path(image.path(target))
        if target.endswith("/"):
            destination.mkdir(parents=True, exist_ok=True)
        for source in sources:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, destination, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(origin, destination)
    return image


@dataclass(frozen=True)
class Ran:
    command: str
    code: int
    output: str


@pytest.fixture(scope="module")
def built(dockerfile: Dockerfile, image: Image) -> list[Ran]:
    """Each command of the RUN lines, run in order until one fails."""
    ran: list[Ran] = []
    for line in dockerfile.runs:
        for command in (part.strip() for part in line.split("&&")):
            program = shlex.split(command)[0]
            if program in SYSTEM_SETUP:
                continue
            if program not in RUNS:
                return [*ran, Ran(command, -1, f"teach this test to run {program}")]
            done = image.run(command)
            ran.append(Ran(command, done.returncode, done.stdout + done.stderr))
            if done.returncode != 0:
                return ran
    return ran


@pytest.mark.slow
def test_every_run_line_runs(built: list[Ran], image: Image) -> None:
    for step in built:
        assert step.code == 0, f"RUN {step.command}\n{step.output[-3000:]}"
        assert "does not provide the extra" not in step.output, step.output
    assert [shlex.split(step.command)[0] for step in built] == ["pip", "pip", "voicehub"]
    assert "0 with errors" in built[-1].output  # `voicehub channels`: every desk loads
    installed = subprocess.run(
        [str(image.venv / "bin" / "python"), "-c", "import voicehub; print(voicehub.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=image.root,
    )
    assert installed.stdout.startswith(str(image.venv))  # the image's own copy, not the repo's


@pytest.mark.slow
def test_the_default_command_serves_passes_its_health_check_and_drains_on_sigterm(
    dockerfile: Dockerfile,
    image: Image,
    built: list[Ran],
    unused_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if any(step.code != 0 for step in built):
        pytest.fail("the RUN lines failed (see test_every_run_line_runs)")
    assert dockerfile.cmd[:2] == ["voicehub", "serve"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    serve_env = {k: str(v) for k, v in compose["services"]["serve"]["environment"].items()}
    env = {**image.env, **{k: image.path(_compose_default(v)) for k, v in serve_env.items()}}
    env.pop("VOICEHUB_STORE")  # redis://redis:6379: the compose network's host
    # What the command needs on 0.0.0.0 (a token) is what the compose file gives it.
    for key, value in env.items():
        if key.startswith("VOICEHUB_"):
            monkeypatch.setenv(key, value)
    ServerSettings.from_env(host=_flag(dockerfile.cmd, "--host")).check_bind()
    command = _with_flag(
        _with_flag(dockerfile.cmd, "--host", "127.0.0.1"), "--port", str(unused_port)
    )
    with _running(command, image, env) as process:
        assert process.stdout is not None
        line = process.stdout.readline()
        log = (image.root / "serve.log").read_text()
        assert f"serving at http://127.0.0.1:{unused_port}/" in line, line + log[-3000:]
        health = [
            image.path(part).replace(":8080/", f":{unused_port}/")
            for part in dockerfile.healthcheck
        ]
        checked = subprocess.run(
            health, cwd=image.app, env=env, capture_output=True, text=True, timeout=30
        )
        assert checked.returncode == 0, checked.stderr
        token = env["VOICEHUB_TOKEN"]
        body = httpx.get(
            f"http://127.0.0.1:{unused_port}/health",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ).json()
        assert "research-cloud" in body["desks"] and "research-realtime" in body["desks"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _compose_default(value: str) -> str:
    found = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
    return found.group(1) if found else value


def _flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _with_flag(command: list[str], name: str, value: str) -> list[str]:
    changed = list(command)
    changed[changed.index(name) + 1] = value
    return changed


class _running:
    """The command as a process of its own, killed by its PID if the test fails first."""

    def __init__(self, command: list[str], image: Image, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [image.path(part) for part in command],
            cwd=image.app,
            env=env,
            stdout=subprocess.PIPE,
            stderr=(image.root / "serve.log").open("w"),
            text=True,
        )

    def __enter__(self) -> subprocess.Popen[str]:
        return self.process

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
