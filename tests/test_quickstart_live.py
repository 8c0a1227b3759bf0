"""The quickstart as a newcomer follows it: every command of its bash blocks, in order, run
against a live `voicehub serve` (the embedded offline stack, 127.0.0.1, a free port) in a
folder holding a copy of the example desks, and what the page says they print checked
against what they print. A renamed flag, a changed line of the report or a desk that no
longer answers as shown fails here.

What is not run as typed, and why:

- `make run` is the `voicehub serve` its recipe runs (checked in the Makefile), on a free
  port instead of 8080; `make run`'s install and model steps are `make test`'s too.
- each `voicehub call` gets `--fast` (the same words, sent faster than real time, playout
  acknowledged at once): at real-time pace the page's two calls take about 65 s more (33 s
  each, measured on a 2-core AMD EPYC); tests/server/test_e2e.py calls at real-time pace.
  The script's time is mostly the server's start (loading its models) and the two calls.
- `voicehub console` and `make test` are parsed only (tests/test_docs.py): the console
  needs a microphone and speakers, and `make test` is the suite this test belongs to.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.test_docs import DOCS, REPO, quickstart_commands

pytestmark = pytest.mark.slow

VOICEHUB = ".venv/bin/voicehub"
PARSED_ONLY = {
    "make test": "the whole suite, this test's own",
    f"{VOICEHUB} console": "needs a microphone and speakers",
}
CALL_ENDING = "voicehub call: the conversation settled; hung up"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shape(line: str) -> str:
    """A report line without what differs from call to call: the time column, durations,
    the conversation id, and what was heard's case and punctuation."""
    line = re.sub(r"^\s*\d+\.\d+  ", "", line.rstrip())
    line = re.sub(r"cli-[0-9a-f]{10}", "cli-ID", line)
    line = re.sub(r"\d+\.\d+ s\b", "N s", line)
    if line.startswith("heard"):
        line = re.sub(r"[^\w ]", "", line.lower())
    return line


def sample_call(page: str) -> list[str]:
    """The sample timeline the page shows for its first call, line by line."""
    [sample] = [b for b in re.findall(r"```text\n(.*?)```", page, re.S) if "who" in b]
    return [line for line in sample.splitlines() if line.strip()]


def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    page = (DOCS / "quickstart.md").read_text()
    commands = quickstart_commands()
    shutil.copytree(REPO / "channels", tmp_path / "channels")  # step 5 edits them
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    program = Path(sys.executable).parent / "voicehub"
    assert program.is_file(), f"{program}: voicehub is not installed beside {sys.executable}"
    (tmp_path / VOICEHUB).symlink_to(program)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": "", "VOICEHUB_URL": url}
    server: subprocess.Popen[str] | None = None
    calls = 0
    listed = ""
    try:
        for command in commands:
            words = shlex.split(command)
            if any(command.startswith(skipped) for skipped in PARSED_ONLY):
                continue
            if words == ["make", "run"]:
                server = serve(tmp_path, env, port, page)
                continue
            assert server is not None, f"{command}: the quickstart runs it before make run"
            if words[:2] == [VOICEHUB, "call"]:
                done = run(tmp_path, env, [*words, "--fast"])
                assert done.stderr.rstrip().endswith(CALL_ENDING), command + done.stderr
                if calls == 0:  # the call whose timeline the page shows
                    check_sample_call(tmp_path, done.stdout, page)
                calls += 1
                continue
            done = run(tmp_path, env, words)
            if words[:2] == [VOICEHUB, "channels"]:
                listed = done.stdout
        assert calls >= 2 and "research" in listed
        # step 5: the copied desk, renamed by the page's sed, is listed under its new name
        assert re.search(r"^ok +my-desk ", listed, re.M), listed
        assert server is not None
        server.send_signal(signal.SIGINT)  # "Ctrl-C stops it"
        out, err = server.communicate(timeout=60)
    finally:
        if server is not None and server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, err
    assert "undelivered results stay in the store" in out, out
    assert (tmp_path / "var" / "voicehub.db").is_file()  # where the page says they stay
    assert "Traceback" not in err, err


def serve(folder: Path, env: dict[str, str], port: int, page: str) -> subprocess.Popen[str]:
    """`make run`: the Makefile's recipe, on `port`; its first lines as the page shows them,
    and the console page up (step 2)."""
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe and recipe.group(1).strip().splitlines()[-1] == "$(BIN)/voicehub serve"
    process = subprocess.Popen(
        [VOICEHUB, "serve", "--port", str(port)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    printed = [process.stdout.readline(), process.stdout.readline()]  # once it listens
    [shown] = [b for b in re.findall(r"```text\n(.*?)```", page, re.S) if "serving at" in b]
    expected = shown.replace("127.0.0.1:8080", f"127.0.0.1:{port}").splitlines()
    if [line.rstrip("\n") for line in printed] != expected:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"make run printed {printed}, the page shows {expected}\n{err}")
    console = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
    assert console.status_code == 200 and "<html" in console.text.lower()
    return process


def run(folder: Path, env: dict[str, str], words: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        words, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{shlex.join(words)}: exit {done.returncode}\n{done.stderr}"
    return done


def check_sample_call(folder: Path, printed: str, page: str) -> None:
    """Every line of the page's sample timeline is a line the call printed (times,
    durations and ids aside), and the WAV it names was written."""
    missing = Counter(map(shape, sample_call(page))) - Counter(map(shape, printed.splitlines()))
    assert not missing, f"the page shows lines the call did not print: {missing}\n{printed}"
    [wav] = re.findall(r"^agent audio: (call-cli-[0-9a-f]{10}\.wav)$", printed, re.M)
    assert (folder / wav).stat().st_size > 44_000  # seconds of the agent's speech
