"""writing-a-desk.md as a newcomer follows it: its whole desk files saved in `channels/` as
the page says (a copy of the example desks beside them), `voicehub channels`, then every
`voicehub call` the page shows, against a live `voicehub serve` (the embedded offline stack,
127.0.0.1, a free port). Each call must get what the desk promises for those words: a rule's
answer, not the fallback; a delegation where the page says the workers do the job. A desk
that mishears the page's own words fails here (the hello desk's "hello there" was heard "A
low there" and answered with the fallback).

The ticket desk's call of docs/mcp.md runs the same way. Calls get `--fast` (the same
words, sent faster than real time), as in tests/test_quickstart_live.py, whose helpers this
shares.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_docs import DOCS, REPO
from tests.test_quickstart_live import CALL_ENDING, VOICEHUB, free_port, run

pytestmark = pytest.mark.slow

PAGE = DOCS / "writing-a-desk.md"


def page_desks(page: str) -> dict[str, str]:
    """The page's whole desk files (a `name`), by name."""
    blocks = re.findall(r"```toml\n(.*?)```", page, re.S)
    return {
        tomllib.loads(block)["name"]: block
        for block in blocks
        if re.search(r'^name = "', block, re.M)
    }


def page_calls(page: str) -> list[list[str]]:
    """Every `voicehub call` of the page's desks, in bash blocks or inline."""
    found = re.findall(r"^(\.venv/bin/voicehub call .+)$", page, re.M)
    found += re.findall(r"`(\.venv/bin/voicehub call [^`]+)`", page)
    return [shlex.split(command) for command in dict.fromkeys(found)]


def desk_rules(block: str) -> tuple[str, list[str]]:
    """The desk's scripted fallback and its rules' replies."""
    [agent] = tomllib.loads(block)["agents"][:1]
    scripted = agent.get("scripted", {})
    replies = [rule["say"] for rule in scripted.get("rules", []) if "say" in rule]
    return scripted.get("fallback", ""), replies


@contextlib.contextmanager
def serving(folder: Path, desks: dict[str, str]) -> Iterator[dict[str, str]]:
    """A copy of the example desks and `desks` in `folder`/channels, served by `voicehub
    serve` on a free port (run from `folder`); yields the environment calls need."""
    shutil.copytree(REPO / "channels", folder / "channels")
    for name, block in desks.items():  # "Save it as channels/hello.toml"
        (folder / "channels" / f"{name}.toml").write_text(block)
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / VOICEHUB).symlink_to(Path(sys.executable).parent / "voicehub")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VOICEHUB_TOKEN": "", "VOICEHUB_URL": url}
    for key in ("OPENAI_API_KEY", "DEEPGRAM_API_KEY"):
        env.pop(key, None)
    server = subprocess.Popen(
        [VOICEHUB, "serve", "--port", str(port)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        serving = server.stdout.readline()  # once it listens
        assert "serving at" in serving, serving
        yield env
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()


def call(folder: Path, env: dict[str, str], words: list[str]) -> tuple[str, list[str]]:
    """Run a page's `voicehub call` (with --fast); what it printed, and what the agent
    said after its greeting."""
    done = run(folder, env, [*words, "--fast"])
    assert done.stderr.rstrip().endswith(CALL_ENDING), shlex.join(words) + done.stderr
    said = re.findall(r'^\s*[\d.]+  agent +"(.*)"$', done.stdout, re.M)
    assert said[1:], done.stdout
    return done.stdout, said[1:]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """The page's desks beside the example desks, served once for the module (a start
    loads every desk's models: the two tests' calls share it); the folder and the calls'
    environment."""
    folder = tmp_path_factory.mktemp("newcomer")
    with serving(folder, page_desks(PAGE.read_text())) as env:
        yield folder, env


def test_the_desks_of_writing_a_desk_answer_the_calls_it_shows(
    served: tuple[Path, dict[str, str]],
) -> None:
    page = PAGE.read_text()
    desks = page_desks(page)
    assert {"hello", "helper"} <= set(desks)
    calls = page_calls(page)
    assert {words[2] for words in calls} == {"hello", "helper"}, calls
    folder, env = served
    listed = run(folder, env, [VOICEHUB, "channels"]).stdout
    for name in desks:
        assert re.search(rf"^ok +{name} ", listed, re.M), listed
    for words in calls:
        printed, answers = call(folder, env, words)
        fallback, replies = desk_rules(desks[words[2]])
        assert fallback not in answers, printed
        if replies:  # a rule answered the page's words (its words up to a placeholder)
            heads = [reply.split("{")[0] for reply in replies]
            assert any(a.startswith(h) for a in answers for h in heads if h), printed
        if "[supervisor]" in desks[words[2]]:  # the workers did the job, spoken once
            assert re.search(r"^tasks: [1-9]\d* started", printed, re.M), printed
            assert re.search(r"deliveries: delivered$", printed, re.M), printed


def test_the_ticket_desk_looks_up_the_ticket_the_mcp_page_asks_for(
    served: tuple[Path, dict[str, str]],
) -> None:
    """docs/mcp.md's call: the ticket's number is said aloud, and the recognizer writes it
    in words ('ticket one thousand one'): before, the desk's rule took digits only and the
    caller got the fallback. The example desks are served as they ship (the page's desks
    beside them change none of them)."""
    [words] = page_calls((DOCS / "mcp.md").read_text())
    assert words[2] == "tickets" and "1001" in words[-1], words
    folder, env = served
    assert (folder / "channels" / "tickets.toml").read_text() == (
        REPO / "channels" / "tickets.toml"
    ).read_text()
    printed, answers = call(folder, env, words)
    assert re.search(r"^\s*[\d.]+  tool +ticket_status ", printed, re.M), printed
    assert "Ticket 1001, the printer jams, is open." in answers, printed
