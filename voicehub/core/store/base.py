"""The store protocol: rooms, events, room metadata, tasks, the delivery outbox, instance
heartbeats and the calls in progress.

Records are pydantic models so they cross the store boundary validated and serialisable.
Every implementation must keep `put_delivery` idempotent by delivery id, and `append_event`
by (room, seq, event id): a write retried after its answer was lost is stored once.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, Field

from voicehub.core.events import Event


class RoomStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class RoomRecord(BaseModel):
    """A room as stored. Closed child rooms stay here (archived) after leaving memory."""

    id: str
    parent_id: str | None = None
    status: RoomStatus = RoomStatus.OPEN
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)
    closed_at: float | None = None


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self not in (TaskStatus.QUEUED, TaskStatus.RUNNING)


class TaskRecord(BaseModel):
    """Delegated work: who did what in which child room, and how it ended.

    `owner` is the instance running it (its heartbeat says whether it still lives); `fence`
    counts the record's writes through `swap_task`, so when an owner is lost exactly one
    surviving instance takes the task over, and the lost owner cannot overwrite it later.
    """

    id: str
    parent_room_id: str
    child_room_id: str
    agent_id: str
    input: str
    status: TaskStatus = TaskStatus.QUEUED
    output: str = ""
    reason: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    owner: str = ""
    fence: int = 0


class InstanceRecord(BaseModel):
    """A live voicehub instance's heartbeat: it counts as lost once `expires_at` (epoch
    seconds) has passed without a newer beat."""

    id: str
    started_at: float
    seen_at: float
    expires_at: float
    metadata: dict[str, Any] = Field(default_factory=dict)


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERING = "delivering"
    DELIVERED = "delivered"
    INTERRUPTED = "interrupted"
    HELD = "held"
    EXPIRED = "expired"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (DeliveryStatus.DELIVERED, DeliveryStatus.EXPIRED, DeliveryStatus.FAILED)


class DeliveryRecord(BaseModel):
    """One result waiting to be spoken into a room (the outbox row).

    `fence` counts the record's writes through `swap_delivery` (compare-and-set), so two
    instances cannot both claim it; the claim's fence is the fencing token of the lease
    (`lease_owner` speaks it until `lease_until`, epoch seconds).
    """

    id: str
    room_id: str
    content: str
    strategy: dict[str, Any] = Field(default_factory=dict)
    status: DeliveryStatus = DeliveryStatus.PENDING
    attempts: int = 0
    max_attempts: int = 3
    created_at: float = Field(default_factory=time.time)
    arrived_at: float = 0.0
    expires_at: float | None = None
    updated_at: float = Field(default_factory=time.time)
    error: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    fence: int = 0
    lease_owner: str = ""
    lease_until: float | None = None


class CallState(StrEnum):
    LIVE = "live"  # a caller is on it, served by the record's owner
    HANDING_OVER = "handing_over"  # its owner drains: the next instance goes on seamlessly
    ENDED = "ended"  # the caller hung up, or the call was ended on purpose

    @property
    def open(self) -> bool:
        """Whether a caller is (or should be) on the call."""
        return self is not CallState.ENDED


class CallRecord(BaseModel):
    """A call in progress, as any instance needs it to take the call over: which
    conversation, who serves it, and the state of its line (`line`: the transport's ids,
    such as a Twilio call and stream sid or a LiveKit room and dispatch) and of its
    conversation that the room's events do not hold (`pending_question`: an ask_user
    question waiting for the caller's answer).

    Keyed by room id (one record per conversation, reused by its later calls). `fence`
    counts the record's writes through `swap_call` (compare-and-set), so of two instances
    taking one call exactly one succeeds, and the one it took it from learns so on its next
    write. `takeovers` counts the times another instance took the call up mid-way.
    """

    room_id: str
    desk: str
    conversation: str
    transport: str
    state: CallState = CallState.LIVE
    owner: str = ""
    fence: int = 0
    started_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)
    takeovers: int = 0
    line: dict[str, str] = Field(default_factory=dict)
    pending_question: dict[str, Any] | None = None


class AccessTokenRecord(BaseModel):
    """A scoped access token to the server, as stored: never the secret, only its SHA-256
    (`digest`). `scopes`: "admin" (everything), "read" (the REST view), "desk:<name>" (calls
    to that desk). After a rotation the previous digest is still accepted until
    `previous_until` (epoch seconds), so clients can move over; `expires_at` ends it."""

    id: str
    name: str = ""
    scopes: list[str] = Field(default_factory=list)
    digest: str
    previous_digest: str = ""
    previous_until: float | None = None
    created_at: float = Field(default_factory=time.time)
    expires_at: float | None = None


class Erasure(BaseModel):
    """What `Store.delete_conversation` removed: the rooms (the conversation's own and every
    room under it: workers' child rooms, theirs), and how many records of each kind went
    with them (events, tasks, deliveries with their held results and sealed numbers, call
    records). Files kept outside the store (recordings) are the caller's to delete, by
    `room_ids`."""

    room_ids: list[str] = Field(default_factory=list)
    events: int = 0
    tasks: int = 0
    deliveries: int = 0
    calls: int = 0

    @property
    def found(self) -> bool:
        """Whether there was anything to delete."""
        return bool(self.room_ids or self.events or self.tasks or self.deliveries or self.calls)


class Store(Protocol):
    """Persistence for the hub. Implementations: `MemoryStore`, `SQLiteStore`, `RedisStore`."""

    async def create_room(self, room: RoomRecord) -> None: ...
    async def get_room(self, room_id: str) -> RoomRecord | None: ...
    async def update_room(self, room: RoomRecord) -> None: ...
    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]: ...

    async def append_event(self, event: Event) -> None:
        """Store `event` under its room and seq. The same event (same id) at that seq again
        is already stored: nothing changes and nothing is raised, so a write that landed but
        whose answer was lost can be retried. Another event at a seq already stored raises
        `StoreError`; an unreachable store raises `StoreUnavailableError`."""
        ...

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]: ...
    async def recent_events(self, room_id: str, limit: int) -> list[Event]: ...
    async def last_seq(self, room_id: str) -> int: ...

    async def save_task(self, task: TaskRecord) -> None: ...
    async def get_task(self, task_id: str) -> TaskRecord | None: ...
    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]: ...
    async def count_tasks(self, parent_room_id: str) -> int: ...
    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        """Replace the stored task only if its `fence` is `expected_fence`, atomically;
        False (nothing written) when it changed meanwhile or is missing."""
        ...

    async def beat_instance(self, instance: InstanceRecord) -> None:
        """Store an instance's heartbeat (replacing its previous one)."""
        ...

    async def list_instances(self) -> list[InstanceRecord]:
        """Every instance with a stored heartbeat, live or expired, by id."""
        ...

    async def remove_instance(self, instance_id: str) -> None:
        """Forget an instance (it stopped cleanly, or its tasks were taken over)."""
        ...

    async def swap_call(self, call: CallRecord, *, expected_fence: int) -> bool:
        """Write the call record only if the stored one's `fence` is `expected_fence` (0:
        there is none yet), atomically; False (nothing written) otherwise."""
        ...

    async def get_call(self, room_id: str) -> CallRecord | None: ...

    async def list_calls(self, *, owner: str) -> list[CallRecord]:
        """The open calls (`state.open`) `owner` serves, by room id."""
        ...

    async def put_delivery(self, delivery: DeliveryRecord) -> bool: ...
    async def update_delivery(self, delivery: DeliveryRecord) -> None: ...
    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        """Replace the stored delivery only if its `fence` is `expected_fence`, atomically;
        False (nothing written) when it changed meanwhile or is missing."""
        ...

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None: ...
    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]: ...

    async def save_token(self, token: AccessTokenRecord) -> None:
        """Insert or replace an access token by id (committed now: other instances read it)."""
        ...

    async def list_tokens(self) -> list[AccessTokenRecord]:
        """Every access token, by id."""
        ...

    async def delete_token(self, token_id: str) -> bool:
        """Revoke an access token; False when there was none."""
        ...

    async def delete_conversation(self, room_id: str) -> Erasure:
        """Delete everything keyed to the conversation `room_id`: the room and the rooms
        under it (by `parent_id`, and tasks' child rooms), their events, the tasks they
        delegated, their deliveries (held results and the numbers sealed onto them with
        them) and call records. Nothing of it is left in any table or key; an unknown room
        deletes nothing. Deleting a conversation with a live call is the caller's to refuse.
        """
        ...

    async def close(self) -> None: ...
