"""The worker on the Redis store `voicehub serve` shares (as docker-compose runs them): a result
held for a LiveKit caller who left is in Redis, and a server hub on the same Redis speaks it
on that conversation's next call; a result a server finishes for a caller live in a LiveKit
room is announced to the worker and spoken there at once.

The entrypoint runs as livekit would run it (settings, desk choice from the job, its own
store), on a stand-in room and the scripted session; redis-server is a real one of the test's
own (the worker uses the default key prefix, so it must not share the session server).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.support.waiting import until
from voicehub.core.store.base import DeliveryStatus, Store
from voicehub.core.store.choice import open_store
from voicehub.core.store.redis import RedisStore
from voicehub.desks.desk import build_desk
from voicehub.desks.loading import load_desk_folder
from voicehub.desks.voice_stack import CallSpec
from voicehub.hub import Hub
from voicehub.server.settings import ServerSettings
from voicehub.transports.livekit import RoomAudioTransport
from voicehub.workers.job import CallRoom
from voicehub.workers.load import CallLoad
from voicehub.workers.server import DeskEntrypoint
from voicehub.workers.settings import WorkerSettings
from voicehub_dev.fakes.livekit_room import Changes, FakeAudioSink, StandInJobContext, StandInRoom
from voicehub_dev.fakes.redis_server import RedisServer
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def status_is(
    store: Store, delivery_id: str, status: DeliveryStatus
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        record = await store.get_delivery(delivery_id)
        return record is not None and record.status is status

    return check


async def test_a_result_held_by_the_worker_is_spoken_on_the_next_call_through_serve(
    redis: RedisServer, tmp_path: Path
) -> None:
    settings = WorkerSettings.from_env(
        channels_dir=CHANNELS, store=redis.url, db_path=tmp_path / "unused.db", shutdown_grace=1.0
    )
    assert settings.store == redis.url
    room, factory = StandInRoom(), ScriptedStack()
    entrypoint = DeskEntrypoint(
        settings,
        ["research", "drafting"],
        CallLoad(2),
        voice=lambda: factory,
        room=lambda _ctx: cast(CallRoom, room),
    )
    ctx = StandInJobContext("job-1", "lk-room-1", metadata=json.dumps({"desk": "research"}))
    await entrypoint(ctx)  # type: ignore[arg-type]
    try:
        room.join("alice")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].sink.queued)
        [session] = factory.sessions
        assert session.room_id == "research:alice"
        room.audio[0].sink.play_all()  # the greeting was heard
        room.leave("alice")
        await room.changes.wait_for(lambda: room.audio[0].closed)

        worker_hub = session.hub
        delivery_id = await worker_hub.delivery.deliver(
            "research:alice", "Heat pumps move heat.", strategy="immediate"
        )
        await until(status_is(worker_hub.store, delivery_id, DeliveryStatus.HELD), poll=0)
    finally:
        await ctx.shutdown()
    assert not (tmp_path / "unused.db").exists()  # the worker never opened SQLite

    # `voicehub serve` on the same Redis: the result is there, and alice's next call hears it
    serve_settings = ServerSettings(store=redis.url, db_path=tmp_path / "serve.db")
    hub = Hub(store=await open_store(serve_settings), orchestration=None)
    await hub.start()
    try:
        record = await hub.store.get_delivery(delivery_id)
        assert record is not None and record.status is DeliveryStatus.HELD
        assert record.room_id == "research:alice"

        changes = Changes()
        sink = FakeAudioSink(changes)
        transport = RoomAudioTransport(sink)
        desk = build_desk(load_desk_folder(CHANNELS)["research"])
        serve_factory = ScriptedStack()
        spec = await CallSpec.for_room(hub, desk, "research:alice", transport)
        call = await serve_factory.start(spec)
        transport.bind(call.playout_confirmed)
        await changes.wait_for(lambda: sink.queued)
        assert call.said == ["Heat pumps move heat."]  # resumed: no greeting, the held result
        sink.play_all()
        await until(status_is(hub.store, delivery_id, DeliveryStatus.DELIVERED), poll=0)
        await call.aclose()
        await transport.aclose()
        await desk.aclose()
    finally:
        await hub.aclose()


async def test_a_result_finished_by_serve_reaches_the_caller_live_in_the_livekit_room(
    redis: RedisServer, tmp_path: Path
) -> None:
    settings = WorkerSettings(channels_dir=CHANNELS, store=redis.url, shutdown_grace=1.0)
    room, factory = StandInRoom(), ScriptedStack()
    entrypoint = DeskEntrypoint(
        settings,
        ["research"],
        CallLoad(2),
        voice=lambda: factory,
        room=lambda _ctx: cast(CallRoom, room),
    )
    ctx = StandInJobContext("job-2", "research-1")
    serve = Hub(store=await open_store(ServerSettings(store=redis.url)), orchestration=None)
    await serve.start()
    await entrypoint(ctx)  # type: ignore[arg-type]
    try:
        store = cast(RedisStore, serve.store)

        async def worker_follows() -> bool:
            counts = await store.redis.pubsub_numsub(store.channel)
            return bool(counts) and counts[0][1] == 1

        await until(worker_follows, poll=0)
        room.join("alice")
        await room.changes.wait_for(lambda: room.audio and room.audio[0].sink.queued)
        [session] = factory.sessions
        room.audio[0].sink.play_all()  # the greeting was heard: the call is idle
        await room.changes.wait_for(lambda: session.confirmed)

        delivery_id = await serve.deliver("research:alice", "Heat pumps move heat.", "immediate")
        # no poll and no rejoin: the announcement brings it to the worker, which speaks it
        await room.changes.wait_for(lambda: "Heat pumps move heat." in session.said)
        room.audio[0].sink.play_all()
        await until(status_is(store, delivery_id, DeliveryStatus.DELIVERED), poll=0)
    finally:
        await ctx.shutdown()
        await serve.aclose()
