"""Give freed memory back to the system when a call ends.

Every live object of an ended call is collected, yet glibc keeps the native memory it
freed (audio buffers, onnxruntime and Piper scratch, in the arenas of the worker threads
that allocated them), so the process would grow with every call; `malloc_trim(0)` after
each call gives it back (the `memory` bench shows both). Where the C library has no
`malloc_trim` (musl, macOS) this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

__all__ = ["MemoryTrimmer"]

log = logging.getLogger("voicehub.server")


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class MemoryTrimmer:
    """Trims the heap in a worker thread (it walks every arena), one trim at a time. Calls
    ending while a trim runs share one more trim after it: what they freed may lie in
    arenas the running trim has already walked, and no later call may come to trim it (the
    last calls of a busy period would keep their memory)."""

    def __init__(self, trim: Callable[[int], int] | None = None) -> None:
        self._trim = trim if trim is not None else _malloc_trim()
        self._running: asyncio.Task[None] | None = None
        self._again = False  # a call ended while the running trim ran
        self.trims = 0

    def call_ended(self) -> None:
        if self._trim is None:
            return
        if self._running is not None and not self._running.done():
            self._again = True
            return
        self._running = asyncio.create_task(self._run(self._trim))

    async def _run(self, trim: Callable[[int], int]) -> None:
        while True:
            try:
                await asyncio.to_thread(trim, 0)
                self.trims += 1
            except Exception:  # memory stays with the allocator; the call is over either way
                log.exception("malloc_trim failed")
            if not self._again:
                return
            self._again = False

    async def aclose(self) -> None:
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)
