"""The desks the faults bench calls: `research-slow` (`failover_fleet.desk_files`);
`research-tool`, whose analyst-b is given an MCP tool that never returns (the fake MCP
server's `hang`), bounded only by the task's timeout; `research-deepgram`, which recognizes
the caller with Deepgram (the fake Deepgram at `deepgram_url`)."""

from __future__ import annotations

import sys
from pathlib import Path

from voicehub_dev.bench.failover_fleet import desk_files

__all__ = ["DEEPGRAM_KEY_ENV", "TASK_TIMEOUT", "fault_desks"]

DEEPGRAM_KEY_ENV = "VOICEHUB_BENCH_DEEPGRAM_KEY"

TASK_TIMEOUT = 20.0
"""research-tool's task timeout (research's is 60 s): what ends a tool that never returns."""

_MCP = """
[[mcp]]
name = "faults"
command = ["{python}", "-m", "voicehub_dev.fakes.mcp_server"]
timeout = 600   # longer than the task: the task's own timeout must end the hung call
"""


def fault_desks(folder: Path, model_url: str, deepgram_url: str = "") -> Path:
    """Write the desks into `folder`/channels; returns that folder."""
    channels = desk_files(folder, model_url)
    slow = (channels / "research-slow.toml").read_text()
    if deepgram_url:
        deepgram = slow.replace('name = "research-slow"', 'name = "research-deepgram"', 1)
        stt = deepgram.index("\nstt = ")
        line_end = deepgram.index("\n", stt + 1)
        deepgram = deepgram[:stt] + '\nstt = "deepgram"' + deepgram[line_end:]
        table = (
            f'\n[voice.deepgram]\nbase_url = "{deepgram_url}"\napi_key_env = "{DEEPGRAM_KEY_ENV}"\n'
        )
        delivery = deepgram.index("\n[delivery]")
        deepgram = deepgram[:delivery] + table + deepgram[delivery:]
        (channels / "research-deepgram.toml").write_text(deepgram)
    tool = slow.replace('name = "research-slow"', 'name = "research-tool"', 1)
    b = tool.index('id = "analyst-b"')
    tool = tool[:b] + tool[b:].replace(
        'tools = ["search_knowledge"]', 'tools = ["search_knowledge", "faults.hang"]', 1
    )
    tool = tool.replace("task_timeout = 60.0", f"task_timeout = {TASK_TIMEOUT}", 1)
    assert "faults.hang" in tool and f"task_timeout = {TASK_TIMEOUT}" in tool
    first_table = tool.index("\n[")
    tool = tool[:first_table] + "\n" + _MCP.format(python=sys.executable) + tool[first_table:]
    (channels / "research-tool.toml").write_text(tool)
    return channels
