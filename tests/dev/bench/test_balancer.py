"""The fail-over bench's balancer: new connections go round robin to the instances whose
`/ready` answers 200; one that answers 503 (draining, busy) gets none, one that refuses
connections (dead) is skipped, and with none ready the connection is closed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from voicehub_dev.fakes.balancer import Balancer


class Backend:
    """A tiny HTTP server: `/ready` answers `ready`, every other path its name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = 200
        self.server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        status, body = (self.ready, "ready") if b"/ready" in request else (200, self.name)
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + body.encode())
        await writer.drain()
        writer.close()


@pytest.fixture
async def backends() -> AsyncIterator[list[Backend]]:
    made = [Backend("a"), Backend("b")]
    for backend in made:
        await backend.start()
    yield made
    for backend in made:
        if backend.server is not None and backend.server.is_serving():
            await backend.stop()


async def answers(url: str, count: int) -> list[str]:
    found = []
    async with httpx.AsyncClient(timeout=5) as client:
        for _ in range(count):
            try:
                found.append((await client.get(f"{url}/x")).text)
            except httpx.HTTPError:
                found.append("closed")
    return found


async def test_connections_go_round_robin_to_the_ready_instances_only(
    backends: list[Backend],
) -> None:
    a, b = backends
    async with Balancer([a.url, b.url], interval=60) as balancer:
        await balancer.check()
        assert sorted(await answers(balancer.url, 4)) == ["a", "a", "b", "b"]
        b.ready = 503  # draining
        await balancer.check()
        assert await answers(balancer.url, 3) == ["a", "a", "a"]
        b.ready = 200
        await balancer.check()
        await a.stop()  # dead: refused, skipped before the next check notices
        assert await answers(balancer.url, 3) == ["b", "b", "b"]
        assert balancer.ready == [False, True]
        b.ready = 503
        await balancer.check()
        assert await answers(balancer.url, 1) == ["closed"]  # nobody to take it
