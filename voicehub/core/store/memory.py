"""An in-memory store for tests and quick runs. Nothing survives the process."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, TypeVar

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
from voicehub.core.trusted import replace
from voicehub.errors import StoreError

_Record = TypeVar("_Record", bound=BaseModel)


def _copy_json(value: Any) -> Any:
    """Copy JSON-shaped data (dicts, lists, scalars); much cheaper than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def _copy(record: _Record) -> _Record:
    """A copy sharing nothing mutable with `record` (records hold only JSON-shaped data;
    their only mutable fields are the `metadata` and `strategy` dicts)."""
    update = {
        name: _copy_json(value)
        for name in ("metadata", "strategy", "line", "pending_question")
        if (value := getattr(record, name, None))
    }
    return replace(record, **update)


def _seq(event: Event) -> int:
    return event.seq


class MemoryStore:
    """Dictionaries behind the `Store` protocol. Records are copied in and out, as a real
    store would, so callers never share mutable state with it."""

    def __init__(self) -> None:
        self._rooms: dict[str, RoomRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._tasks: dict[str, TaskRecord] = {}
        self._deliveries: dict[str, DeliveryRecord] = {}
        self._instances: dict[str, InstanceRecord] = {}
        self._calls: dict[str, CallRecord] = {}
        self._tokens: dict[str, AccessTokenRecord] = {}

    async def create_room(self, room: RoomRecord) -> None:
        self._rooms[room.id] = _copy(room)

    async def get_room(self, room_id: str) -> RoomRecord | None:
        room = self._rooms.get(room_id)
        return _copy(room) if room else None

    async def update_room(self, room: RoomRecord) -> None:
        self._rooms[room.id] = _copy(room)

    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]:
        return [
            _copy(room)
            for room in self._rooms.values()
            if (parent_id is None or room.parent_id == parent_id)
            and (status is None or room.status == status)
        ]

    async def append_event(self, event: Event) -> None:
        events = self._events.setdefault(event.room_id, [])
        # Kept in seq order: a retried write may land after a later one of the same room.
        at = bisect.bisect_left(events, event.seq, key=_seq)
        if at < len(events) and events[at].seq == event.seq:
            if events[at].id == event.id:  # the same event again: already stored
                return
            raise StoreError(
                f"the memory store already holds another event at seq {event.seq} of room "
                f"{event.room_id!r}: each seq of a room is stored once"
            )
        events.insert(at, event)  # events are frozen

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        events = [e for e in self._events.get(room_id, ()) if e.seq > after_seq]
        return events if limit is None else events[:limit]

    async def recent_events(self, room_id: str, limit: int) -> list[Event]:
        return self._events.get(room_id, [])[-limit:] if limit > 0 else []

    async def last_seq(self, room_id: str) -> int:
        events = self._events.get(room_id)
        return events[-1].seq if events else 0

    async def save_task(self, task: TaskRecord) -> None:
        self._tasks[task.id] = _copy(task)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        task = self._tasks.get(task_id)
        return _copy(task) if task else None

    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]:
        return [
            _copy(task)
            for task in self._tasks.values()
            if (parent_room_id is None or task.parent_room_id == parent_room_id)
            and (statuses is None or task.status in statuses)
        ]

    async def count_tasks(self, parent_room_id: str) -> int:
        return sum(1 for task in self._tasks.values() if task.parent_room_id == parent_room_id)

    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        stored = self._tasks.get(task.id)
        if stored is None or stored.fence != expected_fence:
            return False
        self._tasks[task.id] = _copy(task)
        return True

    async def beat_instance(self, instance: InstanceRecord) -> None:
        self._instances[instance.id] = _copy(instance)

    async def list_instances(self) -> list[InstanceRecord]:
        return [_copy(self._instances[key]) for key in sorted(self._instances)]

    async def remove_instance(self, instance_id: str) -> None:
        self._instances.pop(instance_id, None)

    async def swap_call(self, call: CallRecord, *, expected_fence: int) -> bool:
        stored = self._calls.get(call.room_id)
        if (stored.fence if stored is not None else 0) != expected_fence:
            return False
        self._calls[call.room_id] = _copy(call)
        return True

    async def get_call(self, room_id: str) -> CallRecord | None:
        call = self._calls.get(room_id)
        return _copy(call) if call is not None else None

    async def list_calls(self, *, owner: str) -> list[CallRecord]:
        return [
            _copy(call)
            for _, call in sorted(self._calls.items())
            if call.owner == owner and call.state.open
        ]

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        if delivery.id in self._deliveries:
            return False
        self._deliveries[delivery.id] = _copy(delivery)
        return True

    async def update_delivery(self, delivery: DeliveryRecord) -> None:
        self._deliveries[delivery.id] = _copy(delivery)

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        stored = self._deliveries.get(delivery.id)
        if stored is None or stored.fence != expected_fence:
            return False
        self._deliveries[delivery.id] = _copy(delivery)
        return True

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        delivery = self._deliveries.get(delivery_id)
        return _copy(delivery) if delivery else None

    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]:
        return [
            _copy(d)
            for d in sorted(self._deliveries.values(), key=lambda d: (d.created_at, d.id))
            if (room_id is None or d.room_id == room_id)
            and (statuses is None or d.status in statuses)
        ]

    async def save_token(self, token: AccessTokenRecord) -> None:
        self._tokens[token.id] = token.model_copy(deep=True)

    async def list_tokens(self) -> list[AccessTokenRecord]:
        return [self._tokens[key].model_copy(deep=True) for key in sorted(self._tokens)]

    async def delete_token(self, token_id: str) -> bool:
        return self._tokens.pop(token_id, None) is not None

    async def delete_conversation(self, room_id: str) -> Erasure:
        rooms = self._conversation_rooms(room_id)
        erasure = Erasure(room_ids=[r for r in rooms if r in self._rooms])
        for room in rooms:
            self._rooms.pop(room, None)
            erasure.events += len(self._events.pop(room, ()))
            if self._calls.pop(room, None) is not None:
                erasure.calls += 1
        for task_id in [t.id for t in self._tasks.values() if t.parent_room_id in rooms]:
            del self._tasks[task_id]
            erasure.tasks += 1
        for delivery_id in [d.id for d in self._deliveries.values() if d.room_id in rooms]:
            del self._deliveries[delivery_id]
            erasure.deliveries += 1
        return erasure

    def _conversation_rooms(self, room_id: str) -> list[str]:
        """`room_id` and every room under it: children by `parent_id` and tasks' rooms."""
        found, frontier = [room_id], [room_id]
        while frontier:
            parents = set(frontier)
            below = [r.id for r in self._rooms.values() if r.parent_id in parents]
            below += [t.child_room_id for t in self._tasks.values() if t.parent_room_id in parents]
            frontier = [r for r in dict.fromkeys(below) if r not in found]
            found += frontier
        return found

    async def close(self) -> None:
        return None
