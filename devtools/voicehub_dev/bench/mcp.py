"""MCP figures (`voicehub bench --only mcp`): what voicehub's MCP layer adds to a tool call.

A trivial tool (`echo` of the fake server, voicehub_dev.fakes.mcp_server, on the official
SDK) is called through the agent path, `McpTool.invoke` with a room's context (argument
parsing and JSON Schema check, the time limit on the runtime's clock, the answer made a
`ToolResult`), and bare on the same SDK session (`ClientSession.call_tool`: the server's own
time plus the transport and the SDK). Over stdio and over streamable HTTP on 127.0.0.1:

- ``<transport>.us_per_call``: the agent path's round trip;
- ``<transport>.sdk_us_per_call``: the bare SDK call on the same connection;
- ``<transport>.layer_us_per_call``: the difference, voicehub's share (target: under 2000);
- ``<transport>.cpu_us_per_call``, ``sdk_cpu_us_per_call``, ``layer_cpu_us_per_call``: the
  same in this process's CPU time, which a machine busy with other work disturbs far less
  than the round trips (the server's own time is in its process, not in these).

Blocks of calls alternate the two (A, B, A, B ...) on one connection, so drift on a shared
machine hits both alike; each figure is the median over the blocks.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
from asyncio.subprocess import PIPE
from typing import Any

from voicehub.agents.tools import ToolContext
from voicehub.hub import Hub
from voicehub.mcp.servers import HttpServer, McpServerSpec, StdioServer
from voicehub.mcp.toolset import McpToolset

FAKE = ("python", "-m", "voicehub_dev.fakes.mcp_server")


def cpu_model() -> str:
    """The CPU's model name (lscpu's), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


async def _figures(spec: McpServerSpec, blocks: int, calls: int) -> dict[str, float]:
    toolset = McpToolset("bench", [spec], [f"{spec.name}.echo"])
    tool = toolset.tools[f"{spec.name}.echo"]
    try:
        async with Hub() as hub:
            problems = await toolset.open(hub.clock)
            if problems:
                raise SystemExit("; ".join(problems))
            session = (await toolset.connected(spec.name, hub.clock)).session
            assert session is not None
            context = ToolContext(hub=hub, room_id="bench:call", agent_id="desk", call_id="c")
            arguments = {"text": "hello"}
            for _ in range(20):  # warm both paths
                await tool.invoke(arguments, context)
                await session.call_tool("echo", arguments)
            ours: list[tuple[float, float]] = []
            bare: list[tuple[float, float]] = []
            for _ in range(blocks):
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    await tool.invoke(arguments, context)
                ours.append((time.perf_counter() - wall, time.process_time() - cpu))
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(calls):
                    await session.call_tool("echo", arguments)
                bare.append((time.perf_counter() - wall, time.process_time() - cpu))
    finally:
        await toolset.aclose()
    figures: dict[str, float] = {}
    for index, kind in ((0, "us"), (1, "cpu_us")):
        mine = statistics.median(block[index] for block in ours) / calls * 1e6
        sdk = statistics.median(block[index] for block in bare) / calls * 1e6
        figures[f"{kind}_per_call"] = round(mine, 1)
        figures[f"sdk_{kind}_per_call"] = round(sdk, 1)
        figures[f"layer_{kind}_per_call"] = round(mine - sdk, 1)
    return figures


async def run(store: str, quick: bool) -> dict[str, Any]:
    del store
    blocks, calls = (10, 20) if quick else (40, 50)
    stdio = await _figures(
        McpServerSpec("fake", "bench", StdioServer(FAKE), timeout=30), blocks, calls
    )
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "voicehub_dev.fakes.mcp_server", "--http", stdout=PIPE
    )
    try:
        assert server.stdout is not None
        line = (await server.stdout.readline()).decode()
        if not line.startswith("PORT "):
            raise SystemExit(f"the fake MCP server did not start: {line!r}")
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        http = await _figures(
            McpServerSpec("fake", "bench", HttpServer(url), timeout=30), blocks, calls
        )
    finally:
        server.kill()  # the server this section started
        await server.wait()
    return {"mcp": {"stdio": stdio, "http": http, "cpu": cpu_model()}}
