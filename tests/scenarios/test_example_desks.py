"""`voicehub test channels/`: every example desk's scenarios pass against the desks served
in process (the embedded stack: Piper speech, PocketSphinx, the scripted agents), a
scenario that fails shows what differed, the judge is asked through an OpenAI-compatible
server (the fake), and the JUnit XML says the same as the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from voicehub.cli import main
from voicehub.desks.desk import load_desks
from voicehub.scenarios.loading import find_scenario_files, load_scenarios
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, Reply

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
# On the pipeline engine (issue 22) a call whose agent handed over or asked with ask_user
# never settles: the client's agent state stays "speaking" after the new agent's line, so
# these desks' scenarios time out. Reported to the engine's owner; remove when fixed.

FAILING = """
desk = "research"

[[scenario]]
name = "a scenario that expects the wrong topic"

[[scenario.steps]]
text = "research wind turbines"
expect_tool = { name = "delegate_workers", arguments = { task = "heat pumps" } }
expect_reply = "bananas"
"""


async def test_the_example_scenarios_pass_and_a_failing_one_shows_what_differed(
    tmp_path: Path,
) -> None:
    failing = tmp_path / "failing.toml"
    failing.write_text(FAILING)
    junit = tmp_path / "results.xml"
    verdict = '{"pass": true, "reason": "it offered research and read a finding"}'
    async with FakeOpenAIServer([Reply(text=(verdict,))]) as judge:
        env = {
            **{
                k: v
                for k, v in os.environ.items()
                if k not in ("DEEPGRAM_API_KEY", "OPENAI_API_KEY")
            },
            "VOICEHUB_JUDGE_MODEL": "judge-model",
            "VOICEHUB_JUDGE_BASE_URL": judge.base_url,
            "VOICEHUB_JUDGE_API_KEY": judge.api_key or "",
        }
        argv = ["test", str(CHANNELS), str(failing), "--desks", str(CHANNELS), "-j", "2"]
        # as `make test` would: its own process (livekit plugins load on a main thread)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "voicehub.cli",
            *argv,
            "--junit",
            str(junit),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await process.communicate()
        code = process.returncode
        judged = judge.requests
    out = output.decode()

    assert code == 1  # the failing scenario
    desks = load_desks(CHANNELS)
    examples = [
        (load_scenarios(path, desks).file.desk, scenario.name)
        for path, _ in find_scenario_files([CHANNELS])
        for scenario in load_scenarios(path, desks).file.scenario
    ]
    skipped = {"research-cloud", "research-realtime"}  # no keys here: skipped, named
    for desk, name in examples:
        mark = "SKIP" if desk in skipped else "PASS"
        assert f"{mark}  {desk}.toml :: {name}" in out, out
    assert "needs DEEPGRAM_API_KEY, OPENAI_API_KEY (requires_env)" in out
    assert "passed, " in out and "2 skipped" in out

    # what differed, step by step
    assert "FAIL  failing.toml :: a scenario that expects the wrong topic" in out
    step = "step 1 (text 'research wind turbines')"
    assert (
        f'{step}: expected tool delegate_workers {{"task": "heat pumps"}}; '
        'got delegate_workers {"task": "wind turbines"}'
    ) in out
    assert f"{step}: expected a reply containing 'bananas'; got \"Sure, I'll have my" in out

    # the judge read the research call's timeline with the rubric
    [request] = judged
    asked = request.messages[-1]["content"]
    assert asked.startswith("Rubric: The agent confirms it will research heat pumps")
    assert "could you research heat pumps for me please" in asked
    assert "judge: passed (it offered research and read a finding)" in out

    suites = ET.parse(junit).getroot()
    cases = {case.get("name"): case for case in suites.iter("testcase")}
    assert len(cases) == len(examples) + 1
    failure = cases["a scenario that expects the wrong topic"].find("failure")
    assert failure is not None and "bananas" in (failure.text or "")
    assert sum(case.find("skipped") is not None for case in cases.values()) == 2
    research = cases["a spoken request is dispatched and its result spoken once"]
    assert research.get("classname") == "research" and research.find("failure") is None
    assert "delivery  delivered" in (research.findtext("system-out") or "")


def test_a_broken_scenario_file_stops_the_run_before_any_call(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('desk = "research"\n[[scenario]]\nname = "x"\nsteps = [{ sing = "a" }]\n')
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["test", str(broken), "--desks", str(CHANNELS)])
    assert code == 2
    assert f"{broken}:4: scenario[0].steps[0]: unknown key 'sing'" in err.getvalue()
