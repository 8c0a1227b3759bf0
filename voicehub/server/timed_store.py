"""A store that records how long each operation takes, around any `Store`.

The server wraps its store in one (`ServerMetrics.timed`) so that `/metrics` shows the
latency of every store operation by name; the backend stays unaware of metrics. Methods a
backend has beyond the protocol (RedisStore's durability check, say) pass through untimed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from voicehub.core.events import Event
    from voicehub.core.store.base import (
        DeliveryRecord,
        DeliveryStatus,
        Erasure,
        RoomRecord,
        RoomStatus,
        Store,
        TaskRecord,
        TaskStatus,
    )

__all__ = ["TimedStore"]

T = TypeVar("T")


class _Observes(Protocol):
    def observe(self, amount: float) -> None: ...


class TimedStore:
    """`inner`'s operations, each timed into `histogram(operation name)`."""

    def __init__(self, inner: Store, histogram: Callable[[str], _Observes]) -> None:
        self.inner = inner
        self._histogram = histogram
        self._children: dict[str, _Observes] = {}  # labels() takes a lock: look up once

    def __getattr__(self, name: str) -> Any:  # backend extras, untimed
        return getattr(self.inner, name)

    async def _timed(self, operation: str, call: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await call
        finally:
            elapsed = time.perf_counter() - started
            child = self._children.get(operation)
            if child is None:
                child = self._children[operation] = self._histogram(operation)
            child.observe(elapsed)

    async def create_room(self, room: RoomRecord) -> None:
        await self._timed("create_room", self.inner.create_room(room))

    async def get_room(self, room_id: str) -> RoomRecord | None:
        return await self._timed("get_room", self.inner.get_room(room_id))

    async def update_room(self, room: RoomRecord) -> None:
        await self._timed("update_room", self.inner.update_room(room))

    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]:
        return await self._timed(
            "list_rooms", self.inner.list_rooms(parent_id=parent_id, status=status)
        )

    async def append_event(self, event: Event) -> None:
        await self._timed("append_event", self.inner.append_event(event))

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        return await self._timed(
            "list_events", self.inner.list_events(room_id, after_seq=after_seq, limit=limit)
        )

    async def recent_events(self, room_id: str, limit: int) -> list[Event]:
        return await self._timed("recent_events", self.inner.recent_events(room_id, limit))

    async def last_seq(self, room_id: str) -> int:
        return await self._timed("last_seq", self.inner.last_seq(room_id))

    async def save_task(self, task: TaskRecord) -> None:
        await self._timed("save_task", self.inner.save_task(task))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        return await self._timed("get_task", self.inner.get_task(task_id))

    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]:
        return await self._timed(
            "list_tasks", self.inner.list_tasks(parent_room_id=parent_room_id, statuses=statuses)
        )

    async def count_tasks(self, parent_room_id: str) -> int:
        return await self._timed("count_tasks", self.inner.count_tasks(parent_room_id))

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        return await self._timed("put_delivery", self.inner.put_delivery(delivery))

    async def update_delivery(self, delivery: DeliveryRecord) -> None:
        await self._timed("update_delivery", self.inner.update_delivery(delivery))

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        return await self._timed(
            "swap_delivery", self.inner.swap_delivery(delivery, expected_fence=expected_fence)
        )

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        return await self._timed("get_delivery", self.inner.get_delivery(delivery_id))

    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]:
        return await self._timed(
            "list_deliveries", self.inner.list_deliveries(room_id=room_id, statuses=statuses)
        )

    async def delete_conversation(self, room_id: str) -> Erasure:
        return await self._timed("delete_conversation", self.inner.delete_conversation(room_id))

    async def close(self) -> None:
        await self.inner.close()
