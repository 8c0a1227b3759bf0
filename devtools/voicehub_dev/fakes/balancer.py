"""A TCP load balancer on 127.0.0.1 in front of several `voicehub serve` instances, as a
deployment has one (the fail-over bench and tests reach the instances through it).

    async with Balancer(["http://127.0.0.1:8001", "http://127.0.0.1:8002"]) as lb:
        lb.url      # http://127.0.0.1:<port>: what callers (and "Twilio") are given

Each new connection goes to the next instance, round robin, among those whose `/ready`
answered 200 at the last check (every `interval` seconds); one that refuses the connection
is skipped for the next; with none ready the connection is closed (a client tries again).
Bytes are piped both ways until either side closes, so when an instance dies its callers'
connections drop, as behind a real balancer, and a draining instance (503) gets none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

import httpx

__all__ = ["Balancer"]

log = logging.getLogger("voicehub_dev.bench")

_CHUNK = 65536


class Balancer:
    """Round robin over the ready instances among `backends` (their base http URLs)."""

    def __init__(self, backends: list[str], *, interval: float = 0.1) -> None:
        self.backends = [urlsplit(url) for url in backends]
        self.interval = interval
        self.ready: list[bool] = [True] * len(backends)
        self.url = ""
        self.connections = 0
        self._next = 0
        self._server: asyncio.Server | None = None
        self._checker: asyncio.Task[None] | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Balancer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._checker = asyncio.create_task(self._check_forever())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._checker is not None:
            self._checker.cancel()
        if self._server is not None:
            self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._checker is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._checker

    def add(self, backend: str) -> None:
        """Put another instance behind the balancer (it must still pass `/ready`)."""
        self.backends.append(urlsplit(backend))
        self.ready.append(False)

    async def check(self) -> None:
        """Ask every instance's `/ready` now. An answer decides; no connection means down;
        a slow answer (a loaded machine) leaves the instance as it was."""
        backends = list(self.backends)
        async with httpx.AsyncClient(timeout=2.0) as client:
            answers = await asyncio.gather(
                *(client.get(f"http://{b.netloc}/ready") for b in backends),
                return_exceptions=True,
            )
        if backends != self.backends:
            return  # changed meanwhile: the next check sees the new list
        self.ready = [
            _ready_after(answer, was) for answer, was in zip(answers, self.ready, strict=True)
        ]

    async def _check_forever(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.check()
            await asyncio.sleep(self.interval)

    def _order(self) -> list[int]:
        """Backends to try for a new connection: the ready ones from the next in turn."""
        count = len(self.backends)
        start, self._next = self._next, (self._next + 1) % max(count, 1)
        turn = [(start + i) % count for i in range(count)]
        return [i for i in turn if self.ready[i]]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for index in self._order():
            backend = self.backends[index]
            try:
                upstream = await asyncio.open_connection(backend.hostname, backend.port)
            except OSError:
                self.ready[index] = False  # dead: skip it until it passes a check again
                continue
            self.connections += 1
            pipe = asyncio.current_task()
            assert pipe is not None
            self._pipes.add(pipe)
            try:
                await _pipe_both_ways(reader, writer, *upstream)
            finally:
                self._pipes.discard(pipe)
            return
        writer.close()  # no instance answers


def _ready_after(answer: httpx.Response | BaseException, was: bool) -> bool:
    if isinstance(answer, httpx.Response):
        return answer.status_code == 200
    if isinstance(answer, httpx.ConnectError):
        return False
    return was  # a timeout: no news


async def _pipe_both_ways(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await source.read(_CHUNK):
                sink.write(data)
                await sink.drain()

    ways = [
        asyncio.create_task(copy(reader, up_writer)),
        asyncio.create_task(copy(up_reader, writer)),
    ]
    try:
        await asyncio.wait(ways, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for way in ways:
            way.cancel()
        for sink in (writer, up_writer):
            with contextlib.suppress(Exception):
                sink.close()
        await asyncio.gather(*ways, return_exceptions=True)
