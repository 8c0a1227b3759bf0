"""The desks served in this process for `voicehub test` without `--url`: the real server
(`create_app`, the embedded voice stack) on a free 127.0.0.1 port, in this event loop, on a
store in a temporary folder, stopped when the scenarios are done."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from voicehub.server.app import create_app, uvicorn_config
from voicehub.server.settings import ServerSettings

__all__ = ["serving"]


class _Server(uvicorn.Server):
    """uvicorn that says when it listens, and leaves the process' signals alone."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(desk_folder: Path) -> AsyncIterator[str]:
    """Serve the desks of `desk_folder` until the block ends; yields the base URL."""
    with tempfile.TemporaryDirectory(prefix="voicehub-test-") as folder:
        settings = ServerSettings(
            channels_dir=desk_folder,
            db_path=Path(folder) / "voicehub.db",
            host="127.0.0.1",
            port=0,
            log_level="warning",
        )
        server = _Server(uvicorn_config(create_app(settings), settings))
        serve = asyncio.create_task(server.serve())
        listening = asyncio.create_task(server.listening.wait())
        await asyncio.wait({serve, listening}, return_when=asyncio.FIRST_COMPLETED)
        if not server.started:
            listening.cancel()
            await serve  # raises the start-up error
            raise RuntimeError("the desks' server did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            await asyncio.wait_for(serve, 30)
