"""A TCP proxy in front of a Redis, told to fail as a network or a fail-over does.

    async with RedisProxy(port_of_redis) as proxy:   # listens on 127.0.0.1, a free port
        proxy.url                   # what the client connects to
        proxy.mode = "drop"         # every connection cut (RST), new ones cut on arrival
        proxy.mode = "error"        # each command answered `proxy.error` (a RESP error line)
        proxy.mode = "forward"      # passes bytes both ways again

`drop` is Redis unreachable behind a network that refuses it (not paused, not restarted:
the Redis itself keeps its data and keeps running). `error` answers as a fail-over does,
without Redis: `READONLY` (a demoted primary), `TRYAGAIN` (slots moving), `CLUSTERDOWN`.
Connections opened while forwarding stay forwarded until the mode changes.

`ProxyThread` runs one on an event loop of its own thread: a caller whose loop blocks (a
bench synthesizing its caller's speech) does not stall the Redis traffic of others.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from types import TracebackType
from typing import Literal, Self

__all__ = ["ProxyMode", "ProxyThread", "RedisProxy", "command_count"]

ProxyMode = Literal["forward", "drop", "error"]


class RedisProxy:
    """See the module docstring."""

    def __init__(self, redis_port: int, *, redis_host: str = "127.0.0.1") -> None:
        self.redis_host, self.redis_port = redis_host, redis_port
        self.mode: ProxyMode = "forward"
        self.error = "READONLY You can't write against a read only replica."
        self.dropped = 0  # connections cut
        self.answered_errors = 0  # commands answered with `error`
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            _reset(writer)  # which ends each connection's task
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        await self._server.wait_closed()

    def set_mode(self, mode: ProxyMode) -> None:
        """Switch: `drop` also cuts every connection open now."""
        self.mode = mode
        if mode == "drop":
            for writer in list(self._writers):
                self.dropped += 1
                _reset(writer)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            if self.mode == "drop":
                self.dropped += 1
                _reset(writer)
            elif self.mode == "error":
                await self._answer_errors(reader, writer)
            else:
                await self._forward(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()

    async def _answer_errors(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        buffer = b""
        while self.mode == "error" and (data := await reader.read(65536)):
            buffer += data
            count, buffer = command_count(buffer)
            self.answered_errors += count
            writer.write(f"-{self.error}\r\n".encode() * count)
            await writer.drain()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(
            self.redis_host, self.redis_port
        )
        self._writers.add(upstream_writer)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while self.mode == "forward" and (data := await source.read(65536)):
                    sink.write(data)
                    await sink.drain()
            _reset(sink)

        try:
            await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))
        finally:
            self._writers.discard(upstream_writer)
            upstream_writer.close()


def command_count(buffer: bytes) -> tuple[int, bytes]:
    """The whole RESP commands at the start of `buffer` (arrays of bulk strings, or inline
    lines), and what is left of it after them."""
    count = 0
    while buffer:
        end = _command_end(buffer)
        if end is None:
            break
        count, buffer = count + 1, buffer[end:]
    return count, buffer


def _command_end(buffer: bytes) -> int | None:
    line_end = buffer.find(b"\r\n")
    if line_end < 0:
        return None
    if not buffer.startswith(b"*"):
        return line_end + 2  # an inline command: one line
    position = line_end + 2
    for _ in range(int(buffer[1:line_end])):
        header_end = buffer.find(b"\r\n", position)
        if header_end < 0:
            return None
        size = int(buffer[position + 1 : header_end])
        position = header_end + 2 + size + 2
        if position > len(buffer):
            return None
    return position


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a RST, as a dropped route or a firewall does, not a polite FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ProxyThread:
    """A `RedisProxy` on a thread of its own (see the module); `set_mode` from any thread.

    with ProxyThread(redis_port) as proxy:
        proxy.url
        proxy.set_mode("drop", error="...")
    """

    def __init__(self, redis_port: int) -> None:
        self.proxy = RedisProxy(redis_port)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="redis-proxy", daemon=True)

    @property
    def url(self) -> str:
        return self.proxy.url

    def __enter__(self) -> Self:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def set_mode(self, mode: ProxyMode, *, error: str | None = None) -> None:
        def switch() -> None:
            if error is not None:
                self.proxy.error = error
            self.proxy.set_mode(mode)

        self._loop.call_soon_threadsafe(switch)

    def _run(self) -> None:
        async def serve() -> None:
            self._stop = asyncio.Event()
            async with self.proxy:
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(serve())
        self._loop.close()
