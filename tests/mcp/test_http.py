"""MCP tools over streamable HTTP, against the fake server on the official SDK on a free
127.0.0.1 port: headers from environment variables, a refused request, a server down at
discovery, and one killed mid-call (the process this test started, by its pid)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.mcp.servers import (
    DESK,
    IO_WAIT,
    closed_port_url,
    http_fake,
    http_spec,
    read_pid,
    toolset,
)
from tests.support.waiting import until
from voicehub.core.clock import VirtualClock

LABEL = f"MCP server 'crm' of desk {DESK!r}"
AUTH = {"Authorization": "VOICEHUB_TEST_CRM_AUTH"}


async def test_headers_come_from_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    with http_fake({"FAKE_MCP_AUTHORIZATION": "Bearer t0k3n"}) as fake:
        monkeypatch.setenv("VOICEHUB_TEST_CRM_AUTH", "Bearer t0k3n")
        tools = toolset(http_spec(fake.url, headers=AUTH), "lookup_ticket")
        try:
            assert await tools.open(VirtualClock()) == []
            answer = await tools.tools["crm.lookup_ticket"].invoke({"ticket_id": "t-1002"})
            assert answer.data["status"] == "closed"
        finally:
            await tools.aclose()

        # a wrong secret: the server refuses, and the problem names the server and the desk
        monkeypatch.setenv("VOICEHUB_TEST_CRM_AUTH", "Bearer wrong")
        refused = toolset(http_spec(fake.url, headers=AUTH), "lookup_ticket")
        try:
            (problem,) = await refused.open(VirtualClock())
            assert problem.startswith(f"{LABEL} is unavailable: ")
            assert "401" in problem
        finally:
            await refused.aclose()

        monkeypatch.delenv("VOICEHUB_TEST_CRM_AUTH")
        unset = toolset(http_spec(fake.url, headers=AUTH), "lookup_ticket")
        try:
            (problem,) = await unset.open(VirtualClock())
            assert f"header 'Authorization': environment variable {AUTH['Authorization']}" in (
                problem
            )
        finally:
            await unset.aclose()


async def test_a_server_down_at_discovery_is_a_problem_and_its_tools_answer_errors() -> None:
    tools = toolset(http_spec(closed_port_url()), "echo")
    try:
        (problem,) = await tools.open(VirtualClock())
        assert problem.startswith(f"{LABEL} is unavailable: ")
        answer = await tools.tools["crm.echo"].invoke({"text": "hi"})
        assert answer.is_error
        assert answer.content.startswith(f"error in tool echo: {LABEL} is unavailable: ")
        assert answer.content.endswith("; the call goes on without echo")
    finally:
        await tools.aclose()


async def test_a_server_killed_mid_call_names_itself_and_later_calls_say_it_is_down(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "pid"
    with http_fake() as fake:
        tools = toolset(http_spec(fake.url), "hang", "echo")
        try:
            assert await tools.open(VirtualClock()) == []
            call = asyncio.ensure_future(tools.tools["crm.hang"].invoke({"marker": str(marker)}))
            await until(
                marker.exists, what="the server to receive the call", timeout=IO_WAIT, poll=0.005
            )
            assert read_pid(marker) == fake.process.pid
            fake.kill()
            lost = await call
            assert lost.is_error
            assert f"{LABEL} stopped answering" in lost.content
            down = await tools.tools["crm.echo"].invoke({"text": "anyone?"})
            assert down.is_error and f"{LABEL} is unavailable" in down.content
        finally:
            await tools.aclose()
