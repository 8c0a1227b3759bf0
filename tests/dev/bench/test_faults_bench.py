"""The faults bench's rig: its redis-server pauses (unreachable, not gone) and comes back
with its data after a restart; the model fails as told."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis
from redis.exceptions import TimeoutError as RedisTimeout

from voicehub.core.store.sqlite import SQLiteStore
from voicehub_dev.bench.faults import FaultyModel, RedisProcess, lock_sqlite


async def test_redis_pauses_and_restarts_with_its_data(tmp_path: Path) -> None:
    redis = RedisProcess(tmp_path)
    await redis.start()
    client = Redis.from_url(redis.url, socket_timeout=0.5, decode_responses=True)
    try:
        await client.set("k", "v")
        redis.signal(signal.SIGSTOP)
        with pytest.raises(RedisTimeout):
            await client.get("k")
        redis.signal(signal.SIGCONT)
        await client.aclose()
        client = Redis.from_url(redis.url, socket_timeout=5, decode_responses=True)
        assert await client.get("k") == "v"
        await redis.stop()
        await redis.start()
        await client.aclose()
        client = Redis.from_url(redis.url, socket_timeout=5, decode_responses=True)
        assert await client.get("k") == "v"  # the AOF kept it
    finally:
        redis.signal(signal.SIGCONT)
        await client.aclose()
        await redis.stop()


async def test_the_model_answers_or_fails_as_its_mode_says() -> None:
    model = FaultyModel()
    body = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
    async with model.server, httpx.AsyncClient(base_url=model.server.base_url) as client:
        for mode, status in (("500", 500), ("429", 429)):
            model.mode = mode
            assert (await client.post("/chat/completions", json=body)).status_code == status


@pytest.mark.slow
async def test_the_sqlite_lock_holds_writers_off_until_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "voicehub.db"
    SQLiteStore(path)  # creates the file with its schema
    locking = asyncio.ensure_future(lock_sqlite(path, 2.0))
    refused = False
    while not locking.done() and not refused:  # the holder reports once it has the lock
        with sqlite3.connect(path, timeout=0.05) as probe:
            try:
                probe.execute("INSERT OR REPLACE INTO tokens VALUES ('x', '{}')")
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc)
                refused = True
        await asyncio.sleep(0.05)
    await locking
    assert refused
    with sqlite3.connect(path, timeout=1) as after:
        after.execute("INSERT INTO tokens VALUES ('y', '{}')")
