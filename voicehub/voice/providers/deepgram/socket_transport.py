"""The WebSocket under the Deepgram SDK's sockets: uncompressed, on websockets' asyncio API.

The SDK's async clients connect with websockets' legacy client, which offers
permessage-deflate: where a server accepts it, every audio message is deflated going up and
every speak message inflated coming down, for audio that hardly compresses (a profile of
the `cloud_pipeline` bench put deflate at about a twentieth of the whole pipeline's CPU).
The SDK takes a `transport_factory` (its documented way to bring one's own socket); this
one opens websockets' current asyncio client with compression off.

The factory is called synchronously (`factory(url, headers)`), so the handshake happens
on the first use of the socket, or at once through `opened_sockets` (what the STT and TTS
streams do: their connect step then raises the handshake's error, with its HTTP status).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

__all__ = ["PlainSocket", "opened_sockets"]

_OPENED: ContextVar[list[PlainSocket] | None] = ContextVar("deepgram_opened", default=None)
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a speak socket's audio message is far smaller


class PlainSocket:
    """An `AsyncTransport` of the Deepgram SDK (send, recv, async iteration, close)."""

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        self.url, self._headers = url, dict(headers)
        self._connection: Any = None
        self._opening: asyncio.Task[Any] | None = None
        self._closed = False
        opened = _OPENED.get()
        if opened is not None:
            opened.append(self)

    async def open(self) -> None:
        """Do the handshake now (once); its error if it fails (`InvalidStatus` carries the
        HTTP status)."""
        if self._connection is not None:
            return
        if self._closed:
            raise ConnectionError("the Deepgram socket was closed before it opened")
        if self._opening is None:
            from websockets.asyncio.client import connect

            self._opening = asyncio.ensure_future(
                connect(
                    self.url,
                    additional_headers=self._headers,
                    compression=None,
                    max_size=MAX_MESSAGE_BYTES,
                )
            )
        self._connection = await asyncio.shield(self._opening)

    async def send(self, data: str | bytes) -> None:
        if self._connection is None:
            await self.open()
        await self._connection.send(data)

    async def recv(self) -> str | bytes:
        if self._connection is None:
            await self.open()
        message: str | bytes = await self._connection.recv()
        return message

    def __aiter__(self) -> AsyncIterator[str | bytes]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[str | bytes]:
        if self._connection is None:
            await self.open()
        async for message in self._connection:
            yield message

    async def close(self) -> None:
        self._closed = True
        if self._connection is not None:
            await self._connection.close()
        elif self._opening is not None:
            self._opening.cancel()
            with contextlib.suppress(BaseException):
                connection = await self._opening
                await connection.close()


@contextlib.contextmanager
def opened_sockets() -> Iterator[list[PlainSocket]]:
    """The `PlainSocket`s the SDK creates inside the block (in this task), so the caller
    can `open()` one right after the SDK's `connect` is entered."""
    opened: list[PlainSocket] = []
    token = _OPENED.set(opened)
    try:
        yield opened
    finally:
        _OPENED.reset(token)
