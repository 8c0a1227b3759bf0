"""The rows of the faults matrix, each a research call through one fault (`call`), on two
`voicehub serve` instances (run by `voicehub_dev.fakes.faulty_serve`, so that their
recognizers, voices and event loops obey the bench's control file) on a redis-server of
the bench's own behind a TCP proxy and a balancer; the Sentinel fail-over row on two instances
of their own on a primary, two replicas and a Sentinel (`redis+sentinel://` with
`wait_replicas=1`); and the two SQLite rows, each on one instance on a SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicehub.core.store.sqlite import SQLiteStore
from voicehub.errors import VoicehubError
from voicehub_dev.bench.failover_fleet import Fleet, Instance
from voicehub_dev.bench.faults.call import REQUEST, Fault, fault_call
from voicehub_dev.bench.faults.desks import DEEPGRAM_KEY_ENV, TASK_TIMEOUT, fault_desks
from voicehub_dev.bench.faults.disk import SmallDisk
from voicehub_dev.bench.faults.rig import Controls, FaultyModel, RedisProcess, lock_sqlite
from voicehub_dev.fakes.deepgram import FakeDeepgram
from voicehub_dev.fakes.faulty_serve import CONTROL_ENV
from voicehub_dev.fakes.on_thread import OnThread
from voicehub_dev.fakes.redis_proxy import ProxyThread
from voicehub_dev.fakes.redis_sentinel import running_sentinel_set

__all__ = ["FAULT_SECONDS", "run"]

FAULT_SECONDS = 10.0
SERVE = "voicehub_dev.fakes.faulty_serve"


@dataclass
class Rig:
    fleet: Fleet
    redis: RedisProcess
    proxy: ProxyThread
    model: FaultyModel
    controls: Controls
    deepgram: OnThread[FakeDeepgram]


async def _for(seconds: float) -> None:
    await asyncio.sleep(seconds)


def fleet_faults(rig: Rig) -> Iterator[Fault]:
    """The rows run on the fleet, in order."""
    redis, proxy, model, controls = rig.redis, rig.proxy, rig.model, rig.controls

    async def paused() -> None:
        redis.signal(signal.SIGSTOP)
        await _for(FAULT_SECONDS)
        redis.signal(signal.SIGCONT)

    async def restarted() -> None:
        await redis.stop()
        await _for(2)
        await redis.start()

    def proxied(mode: Any, error: str = "") -> Any:
        async def fault() -> None:
            proxy.set_mode(mode, error=error or None)
            await _for(FAULT_SECONDS)
            proxy.set_mode("forward")

        return fault

    def model_fails(mode: str) -> Any:
        async def fault() -> None:
            model.mode = mode
            await _for(FAULT_SECONDS)
            model.mode = "ok"

        return fault

    async def model_hangs() -> None:
        model.mode = "ok"  # the request in flight hangs 30 s; later ones answer

    async def arm_model_hang() -> None:
        model.mode = "hang"

    async def arm_tool() -> None:
        model.mode = "tool"

    async def tool_hangs() -> None:
        await _for(TASK_TIMEOUT)  # the fault ends when the task's timeout ends it
        model.mode = "ok"

    def speech(provider: str, mode: str, seconds: float) -> Any:
        async def fault() -> None:
            controls.set(**{provider: mode})
            await _for(seconds)
            controls.set()

        return fault

    def speech_for_a_while(provider: str, mode: str, seconds: float) -> Any:
        async def fault() -> None:  # returns at once: the caller speaks into the fault
            controls.set(**{provider: mode})
            asyncio.get_running_loop().call_later(seconds, controls.set)

        return fault

    async def drop_deepgram() -> None:
        await _for(1.0)  # into the request
        rig.deepgram.call(rig.deepgram.server.drop_listens)

    async def stall() -> None:
        controls.stall(2.0)
        await _for(2.5)

    yield Fault("redis_paused_10s", paused)
    yield Fault("redis_restarted", restarted)
    yield Fault("redis_dropped_10s", proxied("drop"))
    yield Fault(
        "redis_readonly_10s", proxied("error", "READONLY You can't write against a replica.")
    )
    yield Fault("model_500", model_fails("500"))
    yield Fault("model_429", model_fails("429"))
    yield Fault("model_hangs_30s", model_hangs, arm=arm_model_hang)
    yield Fault("tool_never_returns", tool_hangs, arm=arm_tool, desk="research-tool")

    async def recognizers_fail() -> None:
        controls.fail_recognizers()
        await _for(0.5)  # the stream meets it at its next frame

    yield Fault("stt_raises", arm=recognizers_fail)
    yield Fault("stt_hangs_10s", arm=speech_for_a_while("stt", "hang", FAULT_SECONDS))
    yield Fault("stt_lost", arm=speech_for_a_while("stt", "lost", FAULT_SECONDS))
    yield Fault("deepgram_dropped", during=drop_deepgram, desk="research-deepgram")
    yield Fault("tts_raises_10s", speech("tts", "raise", FAULT_SECONDS))
    yield Fault("tts_hangs_10s", speech("tts", "hang", FAULT_SECONDS))
    yield Fault("tts_lost_10s", speech("tts", "lost", FAULT_SECONDS))
    yield Fault("loop_stall_2s", stall)


@contextlib.asynccontextmanager
async def _rig(folder: Path) -> AsyncIterator[Rig]:
    redis = RedisProcess(folder)
    await redis.start()
    model = FaultyModel()
    controls = Controls(folder / "faults.json")
    try:
        # the proxy and the fake Deepgram on threads: the bench's loop may block
        deepgram = OnThread(FakeDeepgram())
        with ProxyThread(redis.port) as proxy, deepgram as fake:
            fake.transcripts.extend([REQUEST] * 1000)  # every utterance heard as the request
            async with model.server:
                channels = fault_desks(folder, model.server.base_url, fake.url)
                async with Fleet(folder, channels, proxy.url, size=2, module=SERVE) as fleet:
                    yield Rig(fleet, redis, proxy, model, controls, deepgram)
    finally:
        await redis.stop()


ONLY_ENV = "VOICEHUB_BENCH_FAULTS"
"""Comma-separated row names: run only those (all when unset)."""
KEEP_ENV = "VOICEHUB_BENCH_FAULTS_KEEP"
"""Set: keep the bench's folder (the servers' logs) and name it."""


async def run(store: str, quick: bool) -> dict[str, Any]:
    only = os.environ.get(ONLY_ENV, "")
    rows: dict[str, Any] = {}
    with _folder() as folder:
        previous = os.environ.get(CONTROL_ENV), os.environ.get(DEEPGRAM_KEY_ENV)
        os.environ[CONTROL_ENV] = str(folder / "faults.json")
        os.environ[DEEPGRAM_KEY_ENV] = FakeDeepgram().api_key
        try:
            async with _rig(folder) as rig:
                for fault in fleet_faults(rig):
                    if only and fault.name not in only.split(","):
                        continue
                    await rig.fleet.ready(2)
                    rig.model.mode = "ok"
                    rig.controls.set()
                    try:
                        url = rig.fleet.balancer.url
                        rows[fault.name] = await fault_call(url, rig.fleet.store, fault)
                    except (VoicehubError, TimeoutError) as exc:
                        rows[fault.name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    print(f"faults: {fault.name}: {rows[fault.name]}", file=sys.stderr)
            Controls(folder / "faults.json").set()  # none of the fleet's faults
            if not only or "redis_failover" in only.split(","):
                rows["redis_failover"] = await _failover_row(folder)
                print(f"faults: redis_failover: {rows['redis_failover']}", file=sys.stderr)
            for name, row in (("sqlite_locked_10s", _locked), ("sqlite_disk_full_10s", _full)):
                if not only or name in only.split(","):
                    rows[name] = await _sqlite_row(folder, name, row)
                    print(f"faults: {name}: {rows[name]}", file=sys.stderr)
        finally:
            _restore(CONTROL_ENV, previous[0])
            _restore(DEEPGRAM_KEY_ENV, previous[1])
    return {"faults": rows}


async def _failover_row(folder: Path) -> dict[str, Any]:
    """Two instances on a Sentinel-managed primary with two replicas; once both analysts
    work, the primary is SIGKILLed and the Sentinel promotes a replica (down-after 500 ms).
    `failover_s` is the kill to the Sentinel naming the new primary; `recover_s` runs from
    the kill."""
    place = folder / "redis_failover"
    place.mkdir()
    model = FaultyModel()
    with running_sentinel_set(replicas=2) as redis_set:
        failover: dict[str, float] = {}

        async def kill_primary() -> None:
            redis_set.kill_primary()
            killed_at = asyncio.get_running_loop().time()
            replicas = {replica.port for replica in redis_set.replicas}
            while await asyncio.to_thread(redis_set.primary_port) not in replicas:  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # the Sentinel's answer, polled
            failover["failover_s"] = asyncio.get_running_loop().time() - killed_at

        # the row's clock runs from the kill: `inject` returns at once, the wait runs on
        promoted: list[asyncio.Task[None]] = []

        async def inject() -> None:
            promoted.append(asyncio.ensure_future(kill_primary()))
            await asyncio.sleep(0)

        try:
            async with model.server:
                channels = fault_desks(place, model.server.base_url)
                url = f"{redis_set.url}?wait_replicas=1"
                async with Fleet(place, channels, url, size=2, module=SERVE) as fleet:
                    await fleet.ready(2)
                    row = await fault_call(
                        fleet.balancer.url, fleet.store, Fault("redis_failover", inject)
                    )
                    if promoted:
                        await promoted[0]
                        row["failover_s"] = round(failover["failover_s"], 2)
                    return row
        except (VoicehubError, TimeoutError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            for task in promoted:
                task.cancel()


async def _locked(path: Path, disk: SmallDisk | None) -> None:
    await lock_sqlite(path, FAULT_SECONDS)


async def _full(path: Path, disk: SmallDisk | None) -> None:
    assert disk is not None
    disk.fill()
    await asyncio.sleep(FAULT_SECONDS)
    disk.free()


async def _sqlite_row(folder: Path, name: str, inject: Any) -> dict[str, Any]:
    """One instance on a SQLite file of its own (on a small tmpfs for the full disk); the
    bench reads the store on the same file, as a second process would."""
    place = folder / name
    place.mkdir()
    model = FaultyModel()
    disk: SmallDisk | None = None
    previous = os.environ.get("VOICEHUB_DB")
    try:
        async with contextlib.AsyncExitStack() as stack:
            if name == "sqlite_disk_full_10s":
                try:
                    disk = await stack.enter_async_context(SmallDisk(place / "disk"))
                except VoicehubError as exc:
                    return {"error": f"no small disk to fill: {exc}"[:300]}
            database = (disk.where if disk is not None else place) / "voicehub.db"
            os.environ["VOICEHUB_DB"] = str(database)
            await stack.enter_async_context(model.server)
            channels = fault_desks(place, model.server.base_url)
            instance = Instance(f"fo-{name}", "sqlite", channels, place, module=SERVE)
            await instance.start()
            stack.push_async_callback(instance.stop)
            store = SQLiteStore(database)
            stack.push_async_callback(store.close)

            async def fault() -> None:
                await inject(database, disk)

            try:
                return await fault_call(instance.url, store, Fault(name, fault))
            except (VoicehubError, TimeoutError) as exc:
                return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        _restore("VOICEHUB_DB", previous)
    return {}


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    """A temporary folder, kept (and named on stderr) when `KEEP_ENV` is set: the
    servers' logs are in it."""
    folder = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    try:
        yield folder
    finally:
        if os.environ.get(KEEP_ENV):
            print(f"faults: the servers' logs are in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
