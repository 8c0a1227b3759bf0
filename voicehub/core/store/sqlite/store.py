"""`SQLiteStore`: the `Store` protocol on one SQLite file, one table module per record."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
from voicehub.core.store.sqlite.calls import CallTable
from voicehub.core.store.sqlite.database import GROUP_COMMIT_SECONDS, Database
from voicehub.core.store.sqlite.deliveries import DeliveryTable
from voicehub.core.store.sqlite.erasure import erase_conversation
from voicehub.core.store.sqlite.events import EventTable
from voicehub.core.store.sqlite.instances import InstanceTable
from voicehub.core.store.sqlite.rooms import RoomTable
from voicehub.core.store.sqlite.tasks import TaskTable
from voicehub.core.store.sqlite.tokens import TokenTable


class SQLiteStore:
    """The `Store` protocol on a SQLite file, created with its schema on first open.

    Methods are `async` because the protocol is; each runs synchronously on the calling
    thread. Outbox writes commit before they return; the others are group-committed
    `group_commit_seconds` after the first of them (see `voicehub.core.store.sqlite.database`).

    Raises `StoreError` (naming the file and what to do) when the file cannot be opened, is not
    a SQLite database, is corrupt, belongs to something else or was written by a newer voicehub,
    and when any method is called after `close()`.
    """

    def __init__(
        self, path: str | Path, *, group_commit_seconds: float = GROUP_COMMIT_SECONDS
    ) -> None:
        self.path = Path(path)
        self._database = Database(self.path, group_commit_seconds)
        self._rooms = RoomTable(self._database)
        self._events = EventTable(self._database)
        self._tasks = TaskTable(self._database)
        self._instances = InstanceTable(self._database)
        self._deliveries = DeliveryTable(self._database)
        self._calls = CallTable(self._database)
        self._tokens = TokenTable(self._database)

    @property
    def statements(self) -> int:
        """Statements run since the store opened, BEGIN and COMMIT included."""
        return self._database.statements

    @property
    def commits(self) -> int:
        """Transactions committed since the store opened."""
        return self._database.commits

    # Rooms

    async def create_room(self, room: RoomRecord) -> None:
        """Store a new room (an existing room with the same id is replaced)."""
        self._rooms.put(room)

    async def get_room(self, room_id: str) -> RoomRecord | None:
        """The room with this id, or None."""
        return self._rooms.get(room_id)

    async def update_room(self, room: RoomRecord) -> None:
        """Replace the stored room with this one (inserting it if missing)."""
        self._rooms.put(room)

    async def list_rooms(
        self, *, parent_id: str | None = None, status: RoomStatus | None = None
    ) -> list[RoomRecord]:
        """Rooms in creation order, optionally only children of `parent_id` or one status."""
        return self._rooms.find(parent_id, status)

    # Events

    async def append_event(self, event: Event) -> None:
        """Store an event under its (room_id, seq); see `Store.append_event`."""
        self._events.append(event)

    async def list_events(
        self, room_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """Events of a room with seq > `after_seq`, oldest first, at most `limit` of them."""
        return self._events.after(room_id, after_seq, limit)

    async def recent_events(self, room_id: str, limit: int) -> list[Event]:
        """The last `limit` events of a room, oldest first."""
        return self._events.recent(room_id, limit)

    async def last_seq(self, room_id: str) -> int:
        """The highest seq stored for a room, 0 if it has no events."""
        return self._events.last_seq(room_id)

    # Tasks

    async def save_task(self, task: TaskRecord) -> None:
        """Insert or replace a task by id."""
        self._tasks.put(task)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task with this id, or None."""
        return self._tasks.get(task_id)

    async def list_tasks(
        self, *, parent_room_id: str | None = None, statuses: Sequence[TaskStatus] | None = None
    ) -> list[TaskRecord]:
        """Tasks in first-save order, optionally of one parent room and/or some statuses."""
        return self._tasks.find(parent_room_id, statuses)

    async def count_tasks(self, parent_room_id: str) -> int:
        """How many tasks a parent room has delegated."""
        return self._tasks.count(parent_room_id)

    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        """Replace the stored task if its fence is `expected_fence`; True if written.

        Group-committed like `save_task` (a delegation finishing two workers writes both
        with the outbox item in one commit). Until then this connection holds SQLite's write
        lock, so another process's swap waits and then sees the new fence; a crash before
        the commit leaves the task as it was, which recovery treats as lost work.
        """
        return self._tasks.swap(task, expected_fence)

    # Instances

    async def beat_instance(self, instance: InstanceRecord) -> None:
        """Store an instance's heartbeat (committed now: other processes read it)."""
        self._instances.beat(instance)

    async def list_instances(self) -> list[InstanceRecord]:
        """Every stored heartbeat, by instance id."""
        return self._instances.find()

    async def remove_instance(self, instance_id: str) -> None:
        """Forget an instance's heartbeat."""
        self._instances.remove(instance_id)

    # Calls

    async def swap_call(self, call: CallRecord, *, expected_fence: int) -> bool:
        """Write the call if the stored one's fence is `expected_fence` (0: none stored);
        committed now (another process may take the call up next)."""
        return self._calls.swap(call, expected_fence)

    async def get_call(self, room_id: str) -> CallRecord | None:
        """The call record of `room_id`, or None."""
        return self._calls.get(room_id)

    async def list_calls(self, *, owner: str) -> list[CallRecord]:
        """The open calls `owner` serves, by room id."""
        return self._calls.owned_by(owner)

    # Deliveries

    async def put_delivery(self, delivery: DeliveryRecord) -> bool:
        """Insert a delivery unless its id is stored already; True if it was inserted.
        Committed before it returns: a result is durable before anything else happens."""
        return self._deliveries.insert(delivery)

    async def update_delivery(self, delivery: DeliveryRecord) -> None:
        """Replace the stored delivery with this one (inserting it if missing).

        Committed now, except the `delivering` mark written just before an injection: it is
        group-committed (with the outcome, when the speech ends that soon). No audio of the
        injection can play before then, and a `delivering` row lost in a crash reads as the
        unfinished item it was: it is spoken again either way.
        """
        self._deliveries.put(delivery)

    async def swap_delivery(self, delivery: DeliveryRecord, *, expected_fence: int) -> bool:
        """Replace the stored delivery if its fence is `expected_fence`; True if written.

        Committed now, except a claim or lease renewal (`delivering`): like `update_delivery`,
        it is group-committed, before any audio of the injection can play. Until then this
        connection holds SQLite's write lock, so another process's claim waits for it and
        then sees the new fence.
        """
        return self._deliveries.swap(delivery, expected_fence)

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        """The delivery with this id, or None."""
        return self._deliveries.get(delivery_id)

    async def list_deliveries(
        self,
        *,
        room_id: str | None = None,
        statuses: Sequence[DeliveryStatus] | None = None,
    ) -> list[DeliveryRecord]:
        """Deliveries ordered by (created_at, id), optionally of one room and/or statuses."""
        return self._deliveries.find(room_id, statuses)

    # Access tokens

    async def save_token(self, token: AccessTokenRecord) -> None:
        """Insert or replace an access token (committed now)."""
        self._tokens.put(token)

    async def list_tokens(self) -> list[AccessTokenRecord]:
        """Every access token, by id."""
        return self._tokens.find()

    async def delete_token(self, token_id: str) -> bool:
        """Revoke an access token (committed now); False when there was none."""
        return self._tokens.remove(token_id)

    # Conversations

    async def delete_conversation(self, room_id: str) -> Erasure:
        """Delete every row keyed to the conversation (see `Store.delete_conversation`), in
        one transaction committed before it returns."""
        return erase_conversation(self._database, room_id)

    async def close(self) -> None:
        """Close the file (checkpointing the WAL). Later calls raise StoreError."""
        self._database.close()
