"""`voicehub bench --only faults`: real faults injected into live research calls, and what the
caller notices. Two `voicehub serve` instances on a redis-server of the bench's own behind a
balancer (`failover_fleet`); the research-slow desk's analyst-b asks a fake OpenAI model.

Each row is one call asking for research; once both analysts work, the fault starts:

- `redis_paused_10s`: redis-server SIGSTOPped for 10 s (unreachable, not restarted), then
  SIGCONT;
- `redis_restarted`: redis-server stopped (SIGTERM, its AOF flushed) and started again on
  the same port and directory 2 s later;
- `model_500`, `model_429`: analyst-b's model answers 500 / 429 (Retry-After: 1) for 10 s;
- `model_hangs_30s`: analyst-b's model sends nothing for 30 s, then answers;
- `sqlite_locked_10s`: one instance on a SQLite file, which another process holds an
  exclusive lock on for 10 s (`BEGIN EXCLUSIVE`).

For each: calls ended (the caller could not go on), results lost (a stored result not
delivered once the call settled, or none stored), spoken twice (heard delivered more than
once), what the caller heard (the results' first words, in order) and `recover_s`: the fault's
end to the last result delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from voicehub.client.call import CallClient, CallOptions, caller_audio
from voicehub.client.reconnect import Backoff
from voicehub.core.store.base import DeliveryStatus, Store
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.errors import VoicehubError
from voicehub.voice.events import DeliveryOutcome, TaskStarted
from voicehub_dev.bench.failover_fleet import Fleet, Instance, desk_files
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, HTTPError, RecordedRequest, Reply

REQUEST = "could you research heat pumps for me please"
ANSWER = "Heat pumps cut heating bills."
SPEED = 8.0
FAULTS = ("redis_paused_10s", "redis_restarted", "model_500", "model_429", "model_hangs_30s")


class RedisProcess:
    """A redis-server of the bench's own (AOF on), which the faults stop and pause."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise VoicehubError(
                "the faults bench needs redis-server (apt-get install redis-server)"
            )
        self.binary, self.folder = binary, folder
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            self.binary, "--bind", "127.0.0.1", "--port", str(self.port),
            "--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            await asyncio.sleep(0.05)
        raise VoicehubError(f"redis-server did not start on port {self.port}")

    def signal(self, number: int) -> None:
        if self.process is not None and self.process.returncode is None:
            os.kill(self.process.pid, number)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()


class FaultyModel:
    """analyst-b's model: answers `ANSWER` after 3 s, or fails as `mode` says."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.server = FakeOpenAIServer(self._answer, api_key=None)

    def _answer(self, request: RecordedRequest) -> Reply | HTTPError:
        if self.mode == "500":
            return HTTPError(500, "the model is down")
        if self.mode == "429":
            return HTTPError(429, "slow down", "rate_limit_error", headers={"Retry-After": "1"})
        return Reply(text=(ANSWER,), delay=30.0 if self.mode == "hang" else 3.0)


async def lock_sqlite(path: Path, seconds: float) -> None:
    """Another process holds an exclusive lock on the file for `seconds`."""
    hold = (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(float(sys.argv[2]))"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", hold, str(path), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    await process.stdout.readline()  # locked now
    await process.wait()


async def fault_call(
    url: str, store: Store, redis: RedisProcess | None, model: FaultyModel, fault: str
) -> dict[str, Any]:
    conversation = f"fault-{fault}-{time.monotonic_ns()}"
    room = f"research-slow:{conversation}"
    options = CallOptions(
        desk="research-slow", server=url, conversation=conversation,
        playout_speed=SPEED, quiet=0.5, reconnect=Backoff(first=0.05, give_up_after=90),
    )  # fmt: skip
    speech = caller_audio(text=REQUEST)
    async with CallClient(options) as call:
        await call.wait_for_turn()
        report = call.report
        if fault.startswith("model"):
            model.mode = {"model_500": "500", "model_429": "429"}.get(fault, "hang")
        await call.say(speech, REQUEST)
        await call.wait_for(lambda: len(report.events_of(TaskStarted)) == 2, 60)
        if fault == "sqlite_locked_10s":
            assert isinstance(store, SQLiteStore)
            await lock_sqlite(store.path, 10)
        elif fault == "redis_paused_10s" and redis is not None:
            redis.signal(signal.SIGSTOP)
            await asyncio.sleep(10)
            redis.signal(signal.SIGCONT)
        elif fault == "redis_restarted" and redis is not None:
            await redis.stop()
            await asyncio.sleep(2)
            await redis.start()
        elif fault == "model_hangs_30s":
            model.mode = "ok"  # the request in flight hangs 30 s; later ones answer
        else:
            await asyncio.sleep(10)
            model.mode = "ok"
        ended_at = time.monotonic()

        async def settled() -> bool:
            with contextlib.suppress(VoicehubError):
                stored = await store.list_deliveries(room_id=room)
                return bool(stored) and all(d.status is DeliveryStatus.DELIVERED for d in stored)
            return False

        recovered: float | None = None
        for _ in range(900):  # up to 3 minutes
            if call.closed:
                break
            if await settled():
                recovered = time.monotonic() - ended_at
                break
            await asyncio.sleep(0.2)
        with contextlib.suppress(Exception):
            await call.settle(20)
        ended = int(call.closed)
        await call.hangup()
    stored = await store.list_deliveries(room_id=room)
    outcomes = report.events_of(DeliveryOutcome)
    heard = [e.delivery_id for e in outcomes if e.outcome == "delivered"]
    return {
        "calls_ended": ended,
        "results_lost": sum(d.status is not DeliveryStatus.DELIVERED for d in stored)
        + (not stored),
        "spoken_twice": sum(heard.count(i) > 1 for i in set(heard)),
        "heard": [" ".join(e.text.split()[:8]) for e in outcomes if e.outcome == "delivered"],
        "recover_s": round(recovered, 2) if recovered is not None else None,
    }


@contextlib.asynccontextmanager
async def _rig(folder: Path) -> AsyncIterator[tuple[Fleet, RedisProcess, FaultyModel]]:
    redis = RedisProcess(folder)
    await redis.start()
    model = FaultyModel()
    try:
        async with model.server:
            channels = desk_files(folder, model.server.base_url)
            async with Fleet(folder, channels, redis.url, size=2) as fleet:
                yield fleet, redis, model
    finally:
        await redis.stop()


async def run(store: str, quick: bool) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as directory:
        async with _rig(Path(directory)) as (fleet, redis, model):
            for fault in FAULTS:
                await fleet.ready(2)
                model.mode = "ok"
                try:
                    url = fleet.balancer.url
                    rows[fault] = await fault_call(url, fleet.store, redis, model, fault)
                except (VoicehubError, TimeoutError) as exc:
                    rows[fault] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        rows["sqlite_locked_10s"] = await _sqlite_row(Path(directory))
    return {"faults": rows}


async def _sqlite_row(folder: Path) -> dict[str, Any]:
    """The SQLite fault: one instance on a file of its own (the store is read on the same
    file, as a second process would)."""
    database = folder / "sqlite" / "voicehub.db"
    database.parent.mkdir()
    model = FaultyModel()
    previous = os.environ.get("VOICEHUB_DB")
    os.environ["VOICEHUB_DB"] = str(database)
    try:
        async with model.server:
            channels = desk_files(database.parent, model.server.base_url)
            instance = Instance("fo-sqlite", "sqlite", channels, database.parent)
            await instance.start()
            store = SQLiteStore(database)
            try:
                return await fault_call(instance.url, store, None, model, "sqlite_locked_10s")
            except (VoicehubError, TimeoutError) as exc:
                return {"error": f"{type(exc).__name__}: {exc}"[:300]}
            finally:
                await store.close()
                await instance.stop()
    finally:
        if previous is None:
            os.environ.pop("VOICEHUB_DB", None)
        else:
            os.environ["VOICEHUB_DB"] = previous
