"""The call's link to the model: one Realtime connection at a time, kept up.

`ModelLink` opens the first connection, hands server events to its listener's handlers
(one reader task per connection, each event dispatched by its `type`), and when
the connection ends without us closing it (a drop, the server closing after an `error`,
the session's time limit) it reconnects: up to `Backoff.attempts` tries, the first at once,
then waits doubling from `first_delay` on the call's clock. The listener hears each step:
`connection_lost`, `connect_failed` (with the reason: an HTTP status such as 429 or 503, a
refused socket), then `connection_restored` (running while the new connection is already
read, so its `session.update` can be answered) or `gave_up`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from websockets.exceptions import InvalidStatus

from voicehub.voice.realtime.connection import EventHandler, ModelConnection

if TYPE_CHECKING:
    from voicehub.core.clock import Clock

__all__ = ["Backoff", "LinkListener", "ModelLink", "describe_connect_error"]

log = logging.getLogger("voicehub.voice.realtime")


@dataclass(frozen=True)
class Backoff:
    """How a dropped connection is retried: `attempts` tries, the first at once, then
    `first_delay` seconds doubling up to `max_delay`."""

    attempts: int = 5
    first_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try `attempt` (1-based)."""
        if attempt <= 1:
            return 0.0
        return float(min(self.max_delay, self.first_delay * 2.0 ** (attempt - 2)))


class LinkListener(Protocol):
    """What the link tells the session: each server event goes to `handlers[type]`."""

    @property
    def handlers(self) -> Mapping[str, EventHandler]: ...

    async def connection_lost(self, reason: str) -> None: ...

    async def connect_failed(self, attempt: int, reason: str) -> None: ...

    async def connection_restored(self, attempts: int) -> None: ...

    async def gave_up(self, reason: str) -> None: ...


def describe_connect_error(exc: BaseException) -> str:
    """A short reason for a failed connect: the HTTP status of a refused handshake (429 is
    the rate limit), else the exception."""
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        return f"HTTP {status}" + (" (rate limited)" if status == 429 else "")
    return f"{type(exc).__name__}: {exc}"


class ModelLink:
    """Opens, reads and reconnects the model connection of one call (`open`, `aclose`)."""

    def __init__(
        self,
        client: object,
        model: str,
        clock: Clock,
        listener: LinkListener,
        *,
        backoff: Backoff | None = None,
        connect_timeout: float = 15.0,
    ) -> None:
        self.client, self.model, self.clock = client, model, clock
        self.listener = listener
        self.backoff = backoff or Backoff()
        self.connect_timeout = connect_timeout
        self.connection: ModelConnection | None = None
        self.generation = 0  # one more per connection: stale work sees it changed
        self._closed = False
        self._reader: asyncio.Task[None] | None = None
        self._restoring: asyncio.Task[None] | None = None

    async def open(self) -> ModelConnection:
        """The first connection (errors propagate: the call cannot start), read from now."""
        connection = await self._connect()
        self._reader = asyncio.create_task(self._run(connection))
        return connection

    async def aclose(self) -> None:
        """Stop reading and reconnecting, and close the connection (normal closure)."""
        self._closed = True
        current = asyncio.current_task()
        for task in (self._reader, self._restoring):
            if task is not None and task is not current:
                task.cancel()
        connection, self.connection = self.connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.aclose()

    async def _connect(self) -> ModelConnection:
        async with asyncio.timeout(self.connect_timeout):
            connection = await ModelConnection.open(self.client, self.model)
        self.connection = connection
        self.generation += 1
        return connection

    async def _run(self, connection: ModelConnection) -> None:
        while True:
            reason = await self._read(connection)
            if self._closed:
                return
            self.connection = None
            await self.listener.connection_lost(reason)
            restored = await self._reconnect()
            if restored is None:
                if not self._closed:
                    await self.listener.gave_up(reason)
                return
            connection, attempts = restored
            self._restoring = asyncio.create_task(self._restore(attempts))

    async def _restore(self, attempts: int) -> None:
        try:
            await self.listener.connection_restored(attempts)
        except asyncio.CancelledError:
            raise
        except Exception:  # a drop during the restore: the reader reconnects again
            log.warning("could not restore the model session", exc_info=True)

    async def _read(self, connection: ModelConnection) -> str:
        try:
            await connection.read(self.listener.handlers)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"the model connection dropped: {exc!r}"
        return "the model closed the connection"

    async def _reconnect(self) -> tuple[ModelConnection, int] | None:
        for attempt in range(1, self.backoff.attempts + 1):
            delay = self.backoff.delay(attempt)
            if delay:
                await self.clock.sleep(delay)
            if self._closed:
                return None
            try:
                return await self._connect(), attempt
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self.listener.connect_failed(attempt, describe_connect_error(exc))
        return None
