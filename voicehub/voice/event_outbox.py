"""The ordered outbox of a call's events: room posts and client events, sent by one worker.

A voice session records what happens on the call (transcripts, tool calls, states) from
callbacks that must not wait: the model's event reader, livekit's callbacks. They `put`
a send here; one task runs the sends in order, so a room post and the client event after it
keep their order, and a slow store never holds up audio.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from voicehub.core.events import ChannelType, Event, EventKind

__all__ = ["EventOutbox", "voice_event"]

log = logging.getLogger("voicehub.voice")

Send = Callable[[], Awaitable[Any]]


def voice_event(
    kind: EventKind, text: str, *, role: str, source: str, metadata: dict[str, Any]
) -> Event:
    """An event a voice session records in its room (what the caller or an agent said or
    did on the call)."""
    return Event(
        kind=kind,
        text=text,
        role=role,
        source=source,
        source_type=ChannelType.VOICE,
        metadata=metadata,
    )


class EventOutbox:
    """Runs queued sends one after another (`start`, then `put`; `aclose` drains)."""

    def __init__(self, room_id: str) -> None:
        self.room_id = room_id
        self._queue: asyncio.Queue[Send] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the worker (idempotent)."""
        if self._worker is None:
            self._worker = asyncio.create_task(self._run())

    def put(self, send: Send) -> None:
        """Queue `send`; it runs after every send queued before it."""
        self._queue.put_nowait(send)

    async def flush(self, timeout: float = 2.0) -> bool:
        """Wait (at most `timeout` seconds) until every send queued so far has run; True
        if they all did. The worker goes on."""
        if self._worker is None or self._worker is asyncio.current_task():
            return self._queue.empty()
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            return False
        return True

    async def aclose(self, timeout: float = 2.0) -> None:
        """Let queued sends finish (at most `timeout` seconds), then stop the worker."""
        if self._worker is not None:
            await self.flush(timeout)  # the last events reach the room
            if self._worker is not asyncio.current_task():
                self._worker.cancel()

    async def _run(self) -> None:
        while True:
            send = await self._queue.get()
            try:
                await send()
            except Exception:
                log.exception("room %s: could not record a voice event", self.room_id)
            finally:
                self._queue.task_done()
