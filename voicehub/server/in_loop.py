"""Serving the app inside the caller's event loop (`voicehub test`, the tests): uvicorn on
127.0.0.1, a free port, until the block ends; shut down the ordinary way (lifespan
shutdown included)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import uvicorn

from voicehub.server.app import uvicorn_config

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from voicehub.server.settings import ServerSettings

__all__ = ["LoopServer", "serving_in_loop"]


class LoopServer(uvicorn.Server):
    """uvicorn that says when it listens, and leaves the process' signals alone."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # Ctrl-C belongs to whoever runs the loop
        yield


@contextlib.asynccontextmanager
async def serving_in_loop(app: Starlette, settings: ServerSettings) -> AsyncIterator[int]:
    """Serve `app` on 127.0.0.1 at a free port (yielded) until the block ends."""
    settings = settings.model_copy(update={"host": "127.0.0.1", "port": 0})
    server = LoopServer(uvicorn_config(app, settings))
    serving = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    await asyncio.wait({serving, listening}, return_when=asyncio.FIRST_COMPLETED)
    if not server.started:
        listening.cancel()
        await serving  # raises the start-up error, if any
        raise RuntimeError("uvicorn did not start")
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        async with asyncio.timeout(30):
            await serving
