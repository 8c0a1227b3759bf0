"""A fake server (an async context manager) run on an event loop of its own thread, so a
test or bench whose own loop blocks (synthesizing its caller's speech, decoding) does not
stall what the server answers to others:

    with OnThread(FakeDeepgram()) as fake:
        fake.url
        on_thread.call(fake.drop_listens)     # run on the server's loop
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

__all__ = ["OnThread"]

T = TypeVar("T", bound=AbstractAsyncContextManager[Any])


class OnThread(Generic[T]):
    """See the module docstring."""

    def __init__(self, server: T) -> None:
        self.server = server
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fake-server", daemon=True)

    def __enter__(self) -> T:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self.server

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def call(self, action: Callable[[], Any]) -> None:
        """Run `action()` on the server's loop (soon; from any thread)."""
        self._loop.call_soon_threadsafe(action)

    def _run(self) -> None:
        async def serve() -> None:
            self._stop = asyncio.Event()
            try:
                async with self.server:
                    self._ready.set()
                    await self._stop.wait()
            except BaseException as error:
                self._error = error
                self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.close()
