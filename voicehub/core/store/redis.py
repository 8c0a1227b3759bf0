"""The store on Redis (redis-py asyncio), shared by every voicehub instance behind one balancer.

    store = RedisStore("redis://localhost:6379/0")
    await store.check_durability()   # warnings when Redis would lose acknowledged writes

Every write is one Lua script (`redis_scripts`; an instance's heartbeat is a single HSET), so
a record, its listing order and its indexes change together; a delivery's status and attempt
count are fields of one record, written at once, and `swap_delivery` (like `swap_task`) is a
compare-and-set on its fence. Events of a room are a sorted set scored by the room's sequence
number. A new delivery is announced on a pub/sub channel in the same script that stores it
(`watch_deliveries`), so the instance holding the call hears of a result finished elsewhere at
once; the announcement is a hint, the store stays the truth. Likewise every change of a
call record is announced (`watch_calls`), so an instance whose call another one took up
ends its side at once.

`redis` is imported here lazily (and only here in `core`): it is the store's own driver, as
`sqlite3` is the SQLite store's.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from voicehub.core.events import Event
from voicehub.core.store.base import (
    AccessTokenRecord,
    CallRecord,
    DeliveryRecord,
    DeliveryStatus,
    Erasure,
    InstanceRecord,
    RoomRecord,
    RoomStatus,
    TaskRecord,
    TaskStatus,
)
from voicehub.core.store.redis_scripts import APPEND_EVENT, ERASE, SWAP_CALL, WRITE_RECORD
from voicehub.core.store.redis_url import (
    SentinelURL,
    is_sentinel_url,
    parse_sentinel_url,
    shown_url,
)
from voicehub.errors import MissingExtraError, StoreError, StoreUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.sentinel import Sentinel

__all__ = ["RedisStore"]

log = logging.getLogger("voicehub.store.redis")

_Record = TypeVar("_Record", bound=BaseModel)

WAIT_TIMEOUT_MS = 1000
"""How long a write waits for its `wait_replicas` (Redis `WAIT`) before it counts as not
written."""


class RedisStore:
    """The `Store` protocol on one Redis database, under the key prefix `prefix`.

    Raises `StoreError` naming the URL (its password redacted) when Redis answers with an
    error, and `StoreUnavailableError` when it cannot be reached (down, restarting, still
    loading its data) or is failing over (READONLY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN):
    that call may succeed once Redis is back.
    """

    def __init__(self, url: str, *, prefix: str = "voicehub", max_connections: int = 32) -> None:
        try:
            from redis.asyncio import BlockingConnectionPool, Redis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as exc:
            raise MissingExtraError("redis", "redis") from exc
        self.url = url
        self.shown_url = shown_url(url)  # what messages and logs say
        self.prefix = prefix
        self.channel = f"{prefix}:deliveries"
        self.calls_channel = f"{prefix}:calls"
        # A blocking pool: many rooms at once wait for a connection instead of failing. A
        # command on a pooled connection that Redis closed (it restarted since) is sent once
        # more on a new one, so the first call after a restart does not fail.
        options: dict[str, Any] = {
            "max_connections": max_connections,
            "timeout": 30,
            "decode_responses": True,
            "retry": Retry(NoBackoff(), 1),
        }
        self._sentinel: Sentinel | None = None
        self._redis: Redis | None
        self.wait_replicas = 0  # replicas each write waits for (a Sentinel URL's option)
        if is_sentinel_url(url):
            try:
                address = parse_sentinel_url(url)
            except ValueError as exc:
                raise StoreError(str(exc)) from exc
            self._sentinel, self._redis = _sentinel_primary(address, options)
            self.wait_replicas = address.wait_replicas
        else:
            pool = BlockingConnectionPool.from_url(url, **options)
            self._redis = Redis(connection_pool=pool)
        self._write_script = self._redis.register_script(WRITE_RECORD)
        self._append_script = self._redis.register_script(APPEND_EVENT)
        self._call_script = self._redis.register_script(SWAP_CALL)
        self._erase_script = self._redis.register_script(ERASE)

    # -- plumbing ------------------------------------------------------------------------

    @property
    def redis(self) -> Redis:
        if self._redis is None:
            raise StoreError(f"Redis store {self.shown_url} is closed: create a new RedisStore")
        return self._redis

    async def _call(self, operation: Awaitable[Any]) -> Any:
        from redis.exceptions import (
            AuthenticationError,
            AuthorizationError,
            ClusterDownError,
            ReadOnlyError,
            RedisError,
            TimeoutError,
            TryAgainError,
        )
        from redis.exceptions import ConnectionError as RedisConnectionError

        try:
            return await operation
        except RedisError as exc:
            # A refused or lost connection, a timeout, a Redis still loading its data: gone
            # for now. So is a fail-over: a demoted primary answers READONLY, a cluster
            # moving slots TRYAGAIN, one without a primary for a slot CLUSTERDOWN. Wrong
            # credentials are a connection error too, but they stay wrong.
            failing_over = isinstance(exc, ReadOnlyError | TryAgainError | ClusterDownError)
            passing = failing_over or (
                isinstance(exc, RedisConnectionError | TimeoutError)
                and not isinstance(exc, AuthenticationError | AuthorizationError)
            )
            if isinstance(exc, ReadOnlyError):
                # The pooled connections lead to the demoted primary: new ones reach the new
                # one (behind a fail-over address, a proxy or a Sentinel-managed name).
                await self.redis.connection_pool.disconnect(inuse_connections=False)
            error = StoreUnavailableError if passing else StoreError
            raise error(
                f"Redis store {self.shown_url} failed: {type(exc).__name__}: {exc}; check that "
                "Redis is running and reachable"
            ) from exc

    async def _written(self, write: Callable[[Any], Any]) -> Any:
        """The answer of `write(client)`, a write command (or script) sent through `client`.
        With `wait_replicas`, it goes down one connection followed by `WAIT`, and counts as
        written only once that many replicas have it: fewer within `WAIT_TIMEOUT_MS` raise
        `StoreUnavailableError`, as a lost answer would (the write is on the primary and may
        be lost in a fail-over; the store's writes are idempotent, so they are retried)."""
        if not self.wait_replicas:
            return await self._call(write(self.redis))

        async def replicated() -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                queued = write(pipe)
                if inspect.iscoroutine(queued):  # a script queues itself when awaited
                    await queued
                pipe.wait(self.wait_replicas, WAIT_TIMEOUT_MS)
                return list(await pipe.execute())

        answer, replicas = await self._call(replicated())
        if int(replicas) < self.wait_replicas:
            raise StoreUnavailableError(
                f"Redis store {self.shown_url}: a write reached {replicas} of the "
                f"{self.wait_replicas} replicas it waits for within {WAIT_TIMEOUT_MS} ms "
                "(wait_replicas); check that the replicas are up and in sync"
            )
        return answer

    def _key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    async def _write(
        self,
        kind: str,
        record_id: str,
        data: str,
        indexes: Mapping[str, str | None],
        *,
        score: float | None = None,
        mode: str = "upsert",
        fence: int | None = None,
        expected_fence: int | None = None,
        announce: str = "",
    ) -> bool:
        keys = [
            self._key(kind),
            self._key(kind, "all"),
            self._key(kind, "ix"),
            self._key("order"),
            self._key(kind, "fence"),
        ]
        index_keys = [self._key(kind, f, v) for f, v in indexes.items() if v is not None]
        args = [
            record_id,
            data,
            "" if score is None else repr(score),
            mode,
            "" if fence is None else str(fence),
            "" if expected_fence is None else str(expected_fence),
            self.channel if announce else "",
            announce,
            *index_keys,
        ]
        written = await self._written(
            lambda client: self._write_script(keys=keys, args=args, client=client)
        )
        return bool(written)

    async def _ids(self, kind: str, *filters: tuple[str, str | Sequence[str] | None]) -> list[str]:
        """Ids of one kind in listing order, through the narrowest index the filters allow."""
        sources: list[list[str]] = []
        for field, value in filters:
            if value is None:
                continue
            values = [value] if isinstance(value, str) else list(value)
            if not values:
                return []
            sources.append([self._key(kind, field, v) for v in values])
        redis = self.redis
        if not sources:
            return list(await self._call(redis.zrange(self._key(kind, "all"), 0, -1)))
        # A union inside each filter (a record is in one status set at a time, so summed
        # scores are its own), an intersection across filters; the first one keeps the order.
        ids: list[str] | None = None
        for keys in sources:
            union = redis.zunion(keys) if len(keys) > 1 else redis.zrange(keys[0], 0, -1)
            found: list[str] = await self._call(union)
            if ids is None:
                ids = list(found)
            else:
                members = set(found)
                ids = [i for i in ids if i in members]
        return ids or []

    async def _records(self, kind: str, model: type[_Record], ids: list[str]) -> list[_Record]:
        if not ids:
            return []
        redis = self.redis
        rows = await self._call(redis.hmget(self._key(kind), ids))
        return [model.model_validate_json(row) for row in rows if row is not None]

    async def _record(self, kind: str, model: type[_Record], record_id: str) -> _Record | None:
        redis = self.redis
        row = await self._call(redis.hget(self._key(kind), record_id))
        return model.model_validate_json(row) if row is not None else None

    # -- durability ----------------------------------------------------------------------

    async def check_durability(self) -> list[str]:
        """Warnings (also logged) when Redis may lose writes it acknowledged: voicehub wants
        `appendonly yes` with `appendfsync everysec` (at most a second lost) or `always`,
        and, behind Sentinel, `wait_replicas` (a fail-over loses what no replica had)."""
        from redis.exceptions import ResponseError

        redis = self.redis
        try:
            config = await self._call(redis.config_get("appendonly", "appendfsync"))
        except StoreError as exc:
            if not isinstance(exc.__cause__, ResponseError):  # unreachable: not a warning
                raise
            config = {}  # CONFIG is disabled on many managed services
        warnings: list[str] = []
        if not config:
            warnings.append(
                f"cannot read the persistence settings of {self.shown_url} (CONFIG is disabled): "
                "make sure it runs with appendonly yes and appendfsync everysec"
            )
        elif config.get("appendonly") != "yes":
            warnings.append(
                f"Redis at {self.shown_url} runs without AOF persistence: a Redis restart loses "
                "results not yet spoken. Set appendonly yes (and appendfsync everysec)"
            )
        elif config.get("appendfsync") == "no":
            warnings.append(
                f"Redis at {self.shown_url} has appendfsync no: a machine crash can lose many "
                "seconds of results. Set appendfsync everysec"
            )
        if self._sentinel is not None and not self.wait_replicas:
            warnings.append(
                f"Redis at {self.shown_url} acknowledges each write before any replica has it: "
                "a fail-over can lose the last results and claims. Add wait_replicas=1 to the "
                "store URL (with two replicas or more)"
            )
        for warning in warnings:
            log.warning("%s", warning)
        return warnings

    async def ping(self) -> bool:
        """Whether Redis answers (for readiness checks); never raises."""
        try:
            return bool(await self._call(self.redis.ping()))
        except StoreError:
            return False

    # -- rooms ---------------------------------------------------------------------------

    async def create_room(self, room: RoomRecord) -> None:
        await self.update_room(room)

    async def get_room(self, room_id: str) -> RoomRecord | None:
        return await self._record("room", RoomRecord, room_id)

    async def update_room(self, room: RoomRecord) -> None:
        indexes = {"parent": room.parent_id, "status": room.status.value}
        await self._write("room", room.id, room.model_dump_json(), indexes)

    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]:
        ids = await self._ids("room", ("parent", parent_id), ("status", status))
        return await self._records("room", RoomRecord, ids)

    # -- events --------------------------------------------------------------------------

    async def append_event(self, event: Event) -> None:
        key = self._key("events", event.room_id)
        args: list[str | int] = [event.seq, event.model_dump_json(), event.id]
        stored = await self._written(
            lambda client: self._append_script(keys=[key], args=args, client=client)
        )
        if not stored:
            raise StoreError(
                f"Redis store {self.shown_url} already holds another event at seq {event.seq} "
                f"of room {event.room_id!r}: each seq of a room is stored once"
            )

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        if limit is not None and limit <= 0:
            return []
        redis, key = self.redis, self._key("events", room_id)
        count = -1 if limit is None else limit
        rows = await self._call(
            redis.zrangebyscore(key, f"({after_seq}", "+inf", start=0, num=count)
        )
        return [Event.model_validate_json(row) for row in rows]

    async def recent_events(self, room_id: str, limit: int) -> list[Event]:
        if limit <= 0:
            return []
        redis, key = self.redis, self._key("events", room_id)
        rows = await self._call(redis.zrange(key, -limit, -1))
        return [Event.model_validate_json(row) for row in rows]

    async def last_seq(self, room_id: str) -> int:
        redis, key = self.redis, self._key("events", room_id)
        last = await self._call(redis.zrange(key, -1, -1, withscores=True))
        return int(last[0][1]) if last else 0

    # -- tasks ---------------------------------------------------------------------------

    async def save_task(self, task: TaskRecord) -> None:
        await self._write_task(task, "upsert")

    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        return await self._write_task(task, "swap", expected_fence)

    async def _write_task(
        self, task: TaskRecord, mode: str, expected_fence: int | None = None
    ) -> bool:
        indexes = {"parent": task.parent_room_id, "status": task.status.value}
        return await self._write(
            "task",
            task.id,
            task.model_dump_json(),
            indexes,
            mode=mode,
            fence=task.fence,
            expected_fence=expected_fence,
        )

    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._record("task", TaskRecord, task_id)

    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]:
        ids = await self._ids("task", ("parent", parent_room_id), ("status", statuses))
        return await self._records("task", TaskRecord, ids)

    async def count_tasks(self, parent_room_id: str) -> int:
        redis, key = self.redis, self._key("task", "parent", parent_room_id)
        return int(await self._call(redis.zcard(key)))

    # -- instances -----------------------------------------------------------------------
    # A heartbeat is one HSET (atomic on its own): it touches no index. It does not wait for
    # replicas: a beat lost in a fail-over is replaced by the next one.

    async def beat_instance(self, instance: InstanceRecord) -> None:
        redis = self.redis
        await self._call(redis.hset(self._key("instance"), instance.id, instance.model_dump_json()))

    async def list_instances(self) -> list[InstanceRecord]:
        rows: dict[str, str] = await self._call(self.redis.hgetall(self._key("instance")))
        return [InstanceRecord.model_validate_json(rows[key]) for key in sorted(rows)]

    async def remove_instance(self, instance_id: str) -> None:
        await self._call(self.redis.hdel(self._key("instance"), instance_id))

    # -- calls -------------------------------------------------------------------------

    async def swap_call(self, call: CallRecord, *, expected_fence: int) -> bool:
        args = [
            call.room_id,
            call.model_dump_json(),
            str(expected_fence),
            str(call.fence),
            self._key("call", "owner", ""),
            call.owner if call.state.open else "",
            self.calls_channel,
            json.dumps([call.room_id, call.owner, call.fence]),
        ]
        keys = [self._key("call"), self._key("call", "fence")]
        swapped = await self._written(
            lambda client: self._call_script(keys=keys, args=args, client=client)
        )
        return bool(swapped)

    async def get_call(self, room_id: str) -> CallRecord | None:
        return await self._record("call", CallRecord, room_id)

    async def list_calls(self, *, owner: str) -> list[CallRecord]:
        ids = sorted(await self._call(self.redis.smembers(self._key("call", "owner", owner))))
        return [c for c in await self._records("call", CallRecord, ids) if c.owner == owner]

    async def watch_calls(self) -> AsyncIterator[tuple[str, str, int]]:
        """(room id, owner, fence) of each call record written by any instance, as it is
        written. Runs until cancelled; messages sent while disconnected are lost."""
        pubsub = self.redis.pubsub()
        await self._call(pubsub.subscribe(self.calls_channel))
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    room_id, owner, fence = json.loads(message["data"])
                    yield str(room_id), str(owner), int(fence)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    # -- deliveries ----------------------------------------------------------------------

    async def _write_delivery(
        self, delivery: DeliveryRecord, mode: str, expected_fence: int | None = None
    ) -> bool:
        announce = json.dumps([delivery.room_id, delivery.id]) if mode == "insert" else ""
        return await self._write(
            "delivery",
            delivery.id,
            delivery.model_dump_json(),
            {"room": delivery.room_id, "status": delivery.status.value},
            score=delivery.created_at,
            mode=mode,
            fence=delivery.fence,
            expected_fence=expected_fence,
            announce=announce,
        )

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        return await self._write_delivery(delivery, "insert")

    async def update_delivery(self, delivery: DeliveryRecord) -> None:
        await self._write_delivery(delivery, "upsert")

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        return await self._write_delivery(delivery, "swap", expected_fence)

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        return await self._record("delivery", DeliveryRecord, delivery_id)

    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]:
        ids = await self._ids("delivery", ("room", room_id), ("status", statuses))
        return await self._records("delivery", DeliveryRecord, ids)

    async def watch_deliveries(self) -> AsyncIterator[tuple[str, str]]:
        """(room id, delivery id) of each delivery added by any instance, as it is added.
        Runs until cancelled; messages sent while disconnected are lost (reload the store)."""
        pubsub = self.redis.pubsub()
        await self._call(pubsub.subscribe(self.channel))
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    room_id, delivery_id = json.loads(message["data"])
                    yield str(room_id), str(delivery_id)
        finally:
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    # -- access tokens -------------------------------------------------------------------
    # One hash, id -> record JSON: each write is a single HSET or HDEL.

    async def save_token(self, token: AccessTokenRecord) -> None:
        record = token.model_dump_json()
        await self._written(lambda client: client.hset(self._key("token"), token.id, record))

    async def list_tokens(self) -> list[AccessTokenRecord]:
        rows: dict[str, str] = await self._call(self.redis.hgetall(self._key("token")))
        return [AccessTokenRecord.model_validate_json(rows[key]) for key in sorted(rows)]

    async def delete_token(self, token_id: str) -> bool:
        return bool(await self._written(lambda client: client.hdel(self._key("token"), token_id)))

    # -- conversations -----------------------------------------------------------------

    async def delete_conversation(self, room_id: str) -> Erasure:
        """Find the conversation's rooms, tasks and deliveries through the indexes, then
        delete them with their events and call records in one script (atomic in Redis).
        A record written under the conversation between the two steps outlives it: delete
        a conversation once its call has ended."""
        redis = self.redis
        rooms, frontier = [room_id], [room_id]
        tasks: list[str] = []
        while frontier:
            below: list[str] = []
            for parent in frontier:
                below += await self._ids("room", ("parent", parent))
                found = await self._call(redis.zrange(self._key("task", "parent", parent), 0, -1))
                tasks += found
                below += [t.child_room_id for t in await self._records("task", TaskRecord, found)]
            frontier = [r for r in dict.fromkeys(below) if r not in rooms]
            rooms += frontier
        deliveries = await self._ids("delivery", ("room", rooms))
        present = await self._call(redis.hmget(self._key("room"), rooms))
        ids = {"room": rooms, "task": tasks, "delivery": deliveries}
        args = [self.prefix, json.dumps(ids)]
        counts = await self._written(lambda client: self._erase_script(args=args, client=client))
        _, task_count, delivery_count, events, calls = (int(n) for n in counts)
        return Erasure(
            room_ids=[room for room, row in zip(rooms, present, strict=True) if row is not None],
            events=events,
            tasks=task_count,
            deliveries=delivery_count,
            calls=calls,
        )

    async def close(self) -> None:
        redis, self._redis = self._redis, None
        sentinel, self._sentinel = self._sentinel, None
        if redis is not None:
            await redis.aclose()
        if sentinel is not None:
            await sentinel.aclose()


def _sentinel_primary(address: SentinelURL, options: dict[str, Any]) -> tuple[Sentinel, Redis]:
    """The Sentinels of `address` and a client of the primary they name, on a blocking pool
    as a plain URL's: each new connection asks the Sentinels where the primary is now, so
    after a fail-over it reaches the promoted replica (a pooled connection to the demoted
    one is dropped on its READONLY answer, one to a stopped one on its error)."""
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

    class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
        """SentinelConnectionPool's address discovery, BlockingConnectionPool's waiting."""

    # A Sentinel that does not answer within a second is passed over for the next one.
    sentinel_options: dict[str, Any] = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    if address.sentinel_password is not None:
        sentinel_options["password"] = address.sentinel_password
        sentinel_options["username"] = address.sentinel_username
    sentinel = Sentinel(list(address.sentinels), sentinel_kwargs=sentinel_options)  # type: ignore[no-untyped-call]
    primary = sentinel.master_for(
        address.service_name,
        connection_pool_class=BlockingSentinelPool,
        db=address.db,
        username=address.username,
        password=address.password,
        **options,
    )
    return sentinel, primary
