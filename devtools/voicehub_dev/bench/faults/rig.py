"""What the faults bench's calls run on: a redis-server of its own it can stop and pause,
analyst-b's model that fails as told, a lock on a SQLite file, and the control file the
servers' speech providers read (`voicehub_dev.fakes.faulty_serve`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from voicehub.errors import VoicehubError
from voicehub_dev.fakes.openai_chat import (
    FakeOpenAIServer,
    FakeToolCall,
    HTTPError,
    RecordedRequest,
    Reply,
)

__all__ = ["ANSWER", "Controls", "FaultyModel", "RedisProcess", "lock_sqlite"]

ANSWER = "Heat pumps cut heating bills."


class RedisProcess:
    """A redis-server of the bench's own (AOF on), which the faults stop and pause."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise VoicehubError(
                "the faults bench needs redis-server (apt-get install redis-server)"
            )
        self.binary, self.folder = binary, folder
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            self.binary, "--bind", "127.0.0.1", "--port", str(self.port),
            "--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            await asyncio.sleep(0.05)
        raise VoicehubError(f"redis-server did not start on port {self.port}")

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            os.kill(self.process.pid, number)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


class FaultyModel:
    """analyst-b's model: answers `ANSWER` after 3 s, or fails as `mode` says: "500",
    "429" (Retry-After: 1), "hang" (30 s before answering), "tool" (calls the MCP tool
    `hang` first, which never returns)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.server = FakeOpenAIServer(self._answer, api_key=None)

    def _answer(self, request: RecordedRequest) -> Reply | HTTPError:
        if self.mode == "500":
            return HTTPError(500, "the model is down")
        if self.mode == "429":
            return HTTPError(429, "slow down", "rate_limit_error", headers={"Retry-After": "1"})
        if self.mode == "tool" and not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=(FakeToolCall("hang"),), finish_reason="tool_calls")
        return Reply(text=(ANSWER,), delay=30.0 if self.mode == "hang" else 3.0)


class Controls:
    """The control file the servers' recognizers, voices and event loops obey."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.orders = 0  # each order's number, new each time
        self.set()

    def set(self, **faults: Any) -> None:
        """`stt="raise"`, `tts="hang"`...; nothing named: no fault."""
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(faults))
        temporary.replace(self.path)  # read whole or not at all

    def fail_recognizers(self) -> None:
        """Every recognizer stream open now fails at its next frame, once."""
        self.orders += 1
        self.set(stt_raise=self.orders)

    def stall(self, seconds: float) -> None:
        """Every server blocks its event loop `seconds` once."""
        self.orders += 1
        self.set(stall=[self.orders, seconds])


async def lock_sqlite(path: Path, seconds: float) -> None:
    """Another process holds an exclusive lock on the file for `seconds`."""
    hold = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(float(sys.argv[2]))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", hold, str(path), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    await process.stdout.readline()  # locked now
    await process.wait()
