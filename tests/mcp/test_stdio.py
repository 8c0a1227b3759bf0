"""MCP tools over stdio, against the fake server on the official SDK: discovery and its
checks, answers and errors through the `Tool` path, a slow tool and a hung one on the
injected clock, a server killed mid-call and one that never starts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from tests.mcp.servers import DESK, IO_WAIT, read_pid, stdio_spec, toolset
from tests.support.waiting import until
from voicehub.agents.tools import ToolContext
from voicehub.core.clock import VirtualClock

LABEL = f"MCP server 'fake' of desk {DESK!r}"


@pytest.mark.slow
async def test_tools_are_discovered_checked_and_answer_through_the_tool_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICEHUB_TEST_FAKE_TOKEN", "t0k3n")
    spec = stdio_spec(env={"FAKE_MCP_TOKEN": "VOICEHUB_TEST_FAKE_TOKEN"})
    tools = toolset(spec, "echo", "lookup_ticket", "fail", "whoami", "refund")
    try:
        problems = await tools.open(VirtualClock())
        # a tool the desk names that the server lacks is a problem naming server and desk
        assert problems == [
            f"{LABEL} has no tool 'refund' (it lists: echo, fail, hang, lookup_ticket, "
            "release, slow, whoami)"
        ]
        lookup = tools.tools["fake.lookup_ticket"]
        assert lookup.spec.description.startswith("The status and subject of a support ticket")
        assert lookup.spec.parameters["required"] == ["ticket_id"]

        found = await lookup.invoke({"ticket_id": "T-1001"})
        assert not found.is_error
        assert json.loads(found.content)["status"] == "open"
        assert found.data == {"ticket_id": "T-1001", "status": "open", "subject": "printer on fire"}

        # the child got the token through `env` from our variable, and nothing else of ours
        who = await tools.tools["fake.whoami"].invoke("{}")
        assert who.data["token"] == "t0k3n"

        failed = await tools.tools["fake.fail"].invoke({"reason": "disk full"}, ToolContext())
        assert failed.is_error
        assert failed.content.startswith(f"error in tool fail: {LABEL}: tool 'fail' failed: ")
        assert "disk full" in failed.content

        # checked against the server's schema here: the model is told, the server not asked
        bad = await tools.tools["fake.echo"].invoke({"text": 3})
        assert bad.is_error and "bad arguments: arguments.text: 3 is not of type 'string'" in (
            bad.content
        )
        assert (await tools.tools["fake.echo"].invoke("not json")).is_error

        missing = await tools.tools["fake.refund"].invoke({})
        assert missing.is_error and "has no tool 'refund'" in missing.content
    finally:
        await tools.aclose()


async def test_a_slow_tool_gets_its_timeout_and_a_hung_one_is_cut_off_on_the_clock() -> None:
    clock = VirtualClock()
    tools = toolset(stdio_spec(timeout=5.0), "slow", "release", "hang", "echo")
    context = ToolContext(hub=None)
    try:
        assert await tools.open(clock) == []
        slow = asyncio.ensure_future(tools.tools["fake.slow"].invoke({"key": "a"}, context))
        await until(
            lambda: clock.next_deadline() is not None,
            what="the call's time limit",
            timeout=IO_WAIT,
            poll=0.005,
        )
        await clock.advance(4.9)  # within its 5 s: still waiting for the server
        assert not slow.done()
        released = await tools.tools["fake.release"].invoke({"key": "a"})
        assert released.content == "ok"
        answer = await slow
        assert (answer.is_error, answer.content) == (False, "released a")

        hung = asyncio.ensure_future(tools.tools["fake.hang"].invoke({}))
        await until(
            lambda: clock.next_deadline() is not None,
            what="the call's time limit",
            timeout=IO_WAIT,
            poll=0.005,
        )
        await clock.advance(5.0)
        cut = await hung
        assert cut.is_error
        assert cut.content == f"error in tool hang: {LABEL}: tool 'hang': no answer within 5 s"
        # the server is still there for the next call
        assert (await tools.tools["fake.echo"].invoke({"text": "still here"})).content == (
            "still here"
        )
    finally:
        await tools.aclose()


@pytest.mark.slow
async def test_a_server_killed_mid_call_names_itself_and_the_next_call_starts_it_again(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "pid"
    tools = toolset(stdio_spec(), "hang", "whoami")
    try:
        assert await tools.open(VirtualClock()) == []
        call = asyncio.ensure_future(tools.tools["fake.hang"].invoke({"marker": str(marker)}))
        await until(
            marker.exists, what="the server to receive the call", timeout=IO_WAIT, poll=0.005
        )
        pid = read_pid(marker)
        os.kill(pid, signal.SIGKILL)  # the server this test's toolset started
        lost = await call
        assert lost.is_error
        assert f"{LABEL} stopped answering" in lost.content
        assert "(during 'hang'); the call goes on" in lost.content

        again = await tools.tools["fake.whoami"].invoke({})
        assert not again.is_error and again.data["pid"] != pid
    finally:
        await tools.aclose()


async def test_a_server_that_does_not_start_is_a_problem_and_its_tools_answer_errors() -> None:
    broken = stdio_spec(command=("python", "-c", "raise SystemExit(3)"), on_error="Sorry!")
    tools = toolset(broken, "echo")
    try:
        (problem,) = await tools.open(VirtualClock())
        assert problem.startswith(f"{LABEL} is unavailable: ")
        assert problem.endswith("; its tools answer with an error until it is back")
        # the desk's on_error is what the model (and a scripted reply) gets; the log has the rest
        answer = await tools.tools["fake.echo"].invoke({"text": "hi"})
        assert (answer.is_error, answer.content) == (True, "Sorry!")
    finally:
        await tools.aclose()


async def test_an_unset_secret_names_the_variable_and_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VOICEHUB_TEST_UNSET", raising=False)
    tools = toolset(stdio_spec(env={"FAKE_MCP_TOKEN": "VOICEHUB_TEST_UNSET"}), "echo")
    try:
        (problem,) = await tools.open(VirtualClock())
        assert problem.startswith(
            f"{LABEL} is unavailable: variable 'FAKE_MCP_TOKEN': environment variable "
            "VOICEHUB_TEST_UNSET is unset"
        )
    finally:
        await tools.aclose()
