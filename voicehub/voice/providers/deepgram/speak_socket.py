"""One open Aura speak socket (`/v1/speak` through the SDK), reusable reply after reply.

A reader task moves the server's messages (binary audio, `Flushed`, `Cleared`, `Warning`)
into `messages`, ending with `CLOSED`. After a barge-in the socket still holds the cut
reply's audio: :meth:`clear` sends `Clear` and drops everything up to `Cleared`, so the next
reply starts clean on the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AsyncExitStack
from typing import Any

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.deepgram.socket_transport import opened_sockets

__all__ = ["CLOSED", "SpeakSocket"]

log = logging.getLogger("voicehub.voice.deepgram")

CLOSED = object()  # the socket ended; the reader puts it last


class SpeakSocket:
    """An entered `speak.v1.connect` context and its message queue."""

    def __init__(self, stack: AsyncExitStack, socket: Any) -> None:
        self._stack, self._socket = stack, socket
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, client: Any, **query: Any) -> SpeakSocket:
        stack = AsyncExitStack()
        try:
            with opened_sockets() as opened:
                socket = await stack.enter_async_context(client.speak.v1.connect(**query))
            for plain in opened:
                await plain.open()  # the handshake: a refusal raises here, with its status
        except BaseException:
            await stack.aclose()
            raise
        return cls(stack, socket)

    async def speak(self, text: str) -> None:
        with vendor_import("deepgram-sdk", "deepgram"):
            from deepgram.speak.v1.types import SpeakV1Text
        await self._socket.send_text(SpeakV1Text(type="Speak", text=text))

    async def flush(self) -> None:
        await self._socket.send_flush()

    async def clear(self, timeout: float = 2.0) -> bool:
        """Send `Clear` and drop messages up to `Cleared`; False if the socket failed."""
        try:
            await self._socket.send_clear()
            async with asyncio.timeout(timeout):
                while True:
                    message = await self.messages.get()
                    if message is CLOSED:
                        return False
                    if getattr(message, "type", None) == "Cleared":
                        return True
        except Exception as exc:
            log.info("Deepgram speak socket could not be cleared: %s", exc)
            return False

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            await self._socket.send_close()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    async def _read(self) -> None:
        try:
            async for message in self._socket:
                self.messages.put_nowait(message)
        except Exception as exc:
            log.info("Deepgram speak socket ended: %s", exc)
        finally:
            self.closed = True
            self.messages.put_nowait(CLOSED)
