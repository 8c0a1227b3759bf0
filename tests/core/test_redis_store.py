"""What only the Redis store does: durability checks, errors naming the server, announcements
of new deliveries, and surviving a Redis restart (AOF on). The shared contract is in
test_store_contract.py."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from voicehub.core.events import Event
from voicehub.core.store.base import DeliveryRecord, DeliveryStatus, RoomRecord
from voicehub.core.store.redis import RedisStore
from voicehub.errors import StoreError, StoreUnavailableError
from voicehub_dev.fakes.redis_proxy import RedisProxy
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    store = RedisStore(redis_server.url, prefix=unique_prefix())
    yield store
    await store.close()


def test_without_redis_server_the_fixture_fails_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y redis-server"):
        RedisServer(tmp_path)


async def test_durability_check_is_quiet_with_aof_on(store: RedisStore) -> None:
    assert await store.check_durability() == []


async def test_durability_check_warns_when_aof_is_off(tmp_path: Path) -> None:
    # A server of its own: turning AOF on again at run time starts a rewrite that a shared
    # server would have to finish before it may shut down.
    server = RedisServer(tmp_path)
    server.start(appendonly=False)
    store = RedisStore(server.url)
    try:
        warnings = await store.check_durability()
    finally:
        await store.close()
        server.stop()
    assert len(warnings) == 1 and "without AOF persistence" in warnings[0]
    assert "appendonly yes" in warnings[0]


async def test_durability_check_warns_on_appendfsync_no(store: RedisStore) -> None:
    await store.redis.config_set("appendfsync", "no")
    try:
        warnings = await store.check_durability()
    finally:
        await store.redis.config_set("appendfsync", "everysec")
    assert len(warnings) == 1 and "appendfsync no" in warnings[0]


async def test_an_unreachable_redis_raises_store_error_naming_it() -> None:
    url = "redis://127.0.0.1:9/0"  # the discard port: nothing listens there
    store = RedisStore(url)
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:9"):
        await store.get_room("main")
    assert await store.ping() is False
    await store.close()


async def test_an_unreachable_redis_is_unavailable_and_its_password_never_shown() -> None:
    store = RedisStore("redis://default:s3cret-pw@127.0.0.1:9/0?password=s3cret-q")
    with pytest.raises(StoreUnavailableError) as raised:  # a passing outage: worth a retry
        await store.append_event(Event(room_id="main", seq=1))
    message = str(raised.value)
    assert "127.0.0.1:9" in message and "[redacted]" in message
    assert "s3cret" not in message
    await store.close()


async def test_a_redis_error_answer_is_not_a_passing_outage(store: RedisStore) -> None:
    await store.redis.set(store._key("events", "main"), "not a sorted set")
    with pytest.raises(StoreError) as raised:
        await store.append_event(Event(room_id="main", seq=1))
    assert not isinstance(raised.value, StoreUnavailableError)


async def test_a_closed_store_refuses_calls(store: RedisStore) -> None:
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get_room("main")


async def test_a_second_event_with_the_same_seq_is_refused(store: RedisStore) -> None:
    await store.append_event(Event(room_id="main", seq=1, text="first"))
    with pytest.raises(StoreError, match="already holds another event at seq 1"):
        await store.append_event(Event(room_id="main", seq=1, text="again"))
    assert [e.text for e in await store.list_events("main")] == ["first"]


async def test_a_new_delivery_is_announced_once_to_every_watcher(
    redis_server: RedisServer,
) -> None:
    prefix = unique_prefix()
    writer, watcher = (
        RedisStore(redis_server.url, prefix=prefix),
        RedisStore(redis_server.url, prefix=prefix),
    )
    seen: list[tuple[str, str]] = []
    subscribed = asyncio.Event()

    async def watch() -> None:
        async for announced in watcher.watch_deliveries():
            seen.append(announced)
            if len(seen) == 2:
                return

    task = asyncio.create_task(watch())
    # Wait until the subscription is live (Redis counts its subscribers), not for a time.
    while not subscribed.is_set():
        counts = await writer.redis.pubsub_numsub(writer.channel)
        if counts and counts[0][1] >= 1:
            subscribed.set()
        else:
            await asyncio.sleep(0)
    record = DeliveryRecord(id="d1", room_id="main", content="the answer")
    assert await writer.put_delivery(record) is True
    assert await writer.put_delivery(record) is False  # a repeat is not announced
    await writer.update_delivery(record.model_copy(update={"status": DeliveryStatus.HELD}))
    await writer.put_delivery(DeliveryRecord(id="d2", room_id="other", content="more"))
    await asyncio.wait_for(task, 5)
    assert seen == [("main", "d1"), ("other", "d2")]
    await writer.close()
    await watcher.close()


async def test_records_survive_a_redis_restart_with_aof(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    store = RedisStore(redis_server.url, prefix=prefix)
    await store.create_room(RoomRecord(id="main"))
    await store.append_event(Event(room_id="main", seq=1, text="hello"))
    held = DeliveryRecord(id="d1", room_id="main", content="x", status=DeliveryStatus.HELD)
    await store.put_delivery(held)
    await store.close()

    redis_server.restart()

    store = RedisStore(redis_server.url, prefix=prefix)
    assert await store.get_room("main") is not None
    assert await store.last_seq("main") == 1
    assert await store.list_deliveries(statuses=[DeliveryStatus.HELD]) == [held]
    await store.close()


async def test_the_first_call_after_a_redis_restart_succeeds(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, prefix=unique_prefix())
    await store.create_room(RoomRecord(id="main"))
    await asyncio.gather(*(store.get_room("main") for _ in range(4)))  # pooled connections
    redis_server.restart()  # which closes every one of them
    try:
        # each pooled connection the restart closed is replaced, not reported as an outage
        for _ in range(4):
            assert await store.get_room("main") is not None
    finally:
        await store.close()


async def test_a_demoted_primary_is_a_passing_outage_and_its_connections_renewed(
    tmp_path: Path,
) -> None:
    # A server of its own: it is made a replica (READONLY to writes), as a fail-over does
    # to the old primary, and made primary again.
    server = RedisServer(tmp_path)
    server.start()
    admin = Redis.from_url(server.url)
    store = RedisStore(server.url, prefix=unique_prefix())
    try:
        await store.create_room(RoomRecord(id="main"))
        await admin.execute_command("REPLICAOF", "127.0.0.1", "9")  # nothing there
        with pytest.raises(StoreUnavailableError, match="ReadOnlyError"):  # worth a retry
            await store.append_event(Event(room_id="main", seq=1))
        clients = await admin.client_list()
        assert len(clients) == 1  # the store's pooled connections were let go
        await admin.execute_command("REPLICAOF", "NO", "ONE")
        await store.append_event(Event(room_id="main", seq=1))
        assert await store.last_seq("main") == 1
    finally:
        await store.close()
        await admin.aclose()
        server.stop()


@pytest.mark.parametrize(
    "answer",
    [
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    ],
)
async def test_fail_over_answers_are_a_passing_outage(
    redis_server: RedisServer, answer: str
) -> None:
    async with RedisProxy(redis_server.port) as proxy:
        store = RedisStore(proxy.url, prefix=unique_prefix())
        try:
            await store.create_room(RoomRecord(id="main"))
            proxy.set_mode("error")
            proxy.error = answer
            with pytest.raises(StoreUnavailableError, match=answer.split()[1]):
                await store.get_room("main")
            proxy.set_mode("forward")
            assert await store.get_room("main") is not None  # over a new connection
        finally:
            await store.close()


async def test_redis_behind_a_dropping_proxy_is_unavailable_then_back(
    redis_server: RedisServer,
) -> None:
    async with RedisProxy(redis_server.port) as proxy:
        store = RedisStore(proxy.url, prefix=unique_prefix())
        try:
            await store.create_room(RoomRecord(id="main"))
            proxy.set_mode("drop")
            with pytest.raises(StoreUnavailableError):
                await store.get_room("main")
            assert proxy.dropped >= 2  # the pooled connection, then the one retried
            proxy.set_mode("forward")
            assert await store.get_room("main") is not None
        finally:
            await store.close()
