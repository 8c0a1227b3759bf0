"""A fake served from a child process of its own, so the benchmarks do not count its CPU
as the process they measure (the loopback Realtime model, the fake Deepgram).

    fake = ChildFake(serve_something, argument)   # `serve_something(conn, argument)`
    info = await fake.start()                      # what `serve_something` sent
    ...
    fake.cpu_seconds()                             # the fake's CPU so far
    await fake.stop()

`serve_something` is a module-level function (the child is spawned: it is pickled by name)
that starts the fake, sends clients what they need through `conn` (an address, a key), and
serves until `serving_until_told(conn)` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from voicehub.errors import VoicehubError
from voicehub_dev.soak.server_process import process_cpu_seconds

__all__ = ["ChildFake", "serving_until_told"]


async def serving_until_told(conn: Connection) -> None:
    """In the child: return once the parent says stop (or goes away)."""
    with contextlib.suppress(EOFError, OSError):
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)


class ChildFake:
    """`serve(conn, *args)` in a spawned child process (see the module)."""

    def __init__(self, serve: Callable[..., None], *args: Any) -> None:
        self._serve, self._args = serve, args
        self._process: Any = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self, timeout: float = 120.0) -> Any:
        """Start the child and return what it sent once serving."""
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._conn = parent
        self._process = context.Process(target=self._serve, args=(child, *self._args), daemon=True)
        self._process.start()
        if not await asyncio.to_thread(parent.poll, timeout):
            await self.stop()
            raise VoicehubError(f"{self._serve.__name__}: the fake did not start in {timeout} s")
        return parent.recv()

    def cpu_seconds(self) -> float | None:
        """CPU the child used so far (user + system), None once it is gone."""
        pid = self.pid
        return process_cpu_seconds(pid) if pid is not None else None

    async def stop(self) -> None:
        """Tell the child to stop, then end it (killed if it does not stop in 10 s)."""
        process, self._process = self._process, None
        if process is None:
            return
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send("stop")
        await asyncio.to_thread(process.join, 10.0)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join, 5.0)
