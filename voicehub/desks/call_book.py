"""This instance's claims on the calls it serves, kept in the store so any instance can take
a call up where another left it.

When a call starts here, `CallBook.claim` writes the conversation's `CallRecord` with this
instance as owner (compare-and-set on its fence: of two instances taking one call, one wins)
and says how the call continues the previous one:

- `new`: no call was open in the conversation (a first call, or a call-back after a hang-up);
- `handover`: the previous instance handed it over (it drains): the call just goes on;
- `failover`: it was live on another instance (killed, or the caller's line dropped there):
  the caller is told they were lost for a moment, and the result being spoken there is
  spoken here (its lease is void: `lease_breakable`);
- `reconnect`: it was live here (the caller's line dropped and came back).

While the call runs, `update` writes what a successor needs (the line's ids); a write that
loses the compare-and-set means another instance took the call, and `on_taken` ends it here.
When the call ends, `release` records how: hung up (ended), handed over, or lost (left open,
for the caller's reconnect or a survivor's sweep).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from voicehub.core.store.base import CallRecord, CallState
from voicehub.core.trusted import replace

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import DeliveryRecord, Store

__all__ = ["CallBook", "Continuation", "Takeover", "follow_calls"]

log = logging.getLogger("voicehub.calls")

Continuation = Literal["new", "handover", "failover", "reconnect"]
_TRIES = 8  # a claim races at most the few instances one caller reaches at once


@dataclass(frozen=True)
class Takeover:
    """How a call that starts here continues its conversation: `continuation`, the instance
    that served it before (`previous_owner`, "" for a new call) and its line's ids."""

    continuation: Continuation
    previous_owner: str = ""
    previous_line: dict[str, str] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        """Whether the caller was cut off (and should hear so)."""
        return self.continuation in ("failover", "reconnect")


class CallBook:
    """The call records this instance (`owner`) holds; `wall` is the epoch clock shared by
    instances. When another instance took one of them, the call must end here: `update`
    returns False and `noticed` True for it."""

    def __init__(self, store: Store, owner: str, *, wall: Callable[[], float]) -> None:
        self.store = store
        self.owner = owner
        self.wall = wall
        self.held: dict[str, CallRecord] = {}  # room id -> the record as this instance wrote it

    async def claim(
        self, room_id: str, desk: str, conversation: str, transport: str, line: dict[str, str]
    ) -> Takeover:
        """Make this instance the owner of the conversation's call; how it continues."""
        for _ in range(_TRIES):
            previous = await self.store.get_call(room_id)
            now = self.wall()
            takeover = _continuation(previous, self.owner)
            record = CallRecord(
                room_id=room_id,
                desk=desk,
                conversation=conversation,
                transport=transport,
                state=CallState.LIVE,
                owner=self.owner,
                fence=(previous.fence if previous is not None else 0) + 1,
                started_at=now
                if takeover.continuation == "new" or previous is None
                else (previous.started_at),
                updated_at=now,
                takeovers=_takeovers(previous, takeover),
                line=dict(line),
            )
            expected = previous.fence if previous is not None else 0
            if await self.store.swap_call(record, expected_fence=expected):
                self.held[room_id] = record
                if takeover.continuation != "new":
                    log.info(
                        "room %s: call taken up here (%s, from %s)",
                        room_id,
                        takeover.continuation,
                        takeover.previous_owner,
                    )
                return takeover
        raise RuntimeError(f"room {room_id}: the call record kept changing; gave up claiming it")

    async def update(self, room_id: str, *, line: dict[str, str]) -> bool:
        """Add `line` ids to the call's record; False if another instance took the call
        meanwhile (it ends here)."""
        held = self.held.get(room_id)
        if held is None:
            return False
        record = replace(
            held, line={**held.line, **line}, fence=held.fence + 1, updated_at=self.wall()
        )
        return await self._write(record, held)

    async def release(self, room_id: str, state: CallState | None) -> None:
        """The call ended here: record `state` (ENDED: hung up; HANDING_OVER: the next
        instance goes on seamlessly; None: lost, left as it is for a reconnect)."""
        held = self.held.pop(room_id, None)
        if held is None or state is None:
            return
        record = replace(held, state=state, fence=held.fence + 1, updated_at=self.wall())
        if await self.store.swap_call(record, expected_fence=held.fence):
            return
        log.info("room %s: the call was taken up elsewhere before it ended here", room_id)

    def holds(self, room_id: str) -> bool:
        return room_id in self.held

    def noticed(self, room_id: str, owner: str, fence: int) -> bool:
        """Another instance wrote the call record of `room_id` (announced by the store):
        True if it took a call held here (the call ends here)."""
        held = self.held.get(room_id)
        if held is None or owner == self.owner or fence <= held.fence:
            return False
        del self.held[room_id]
        return True

    async def lease_breakable(self, record: DeliveryRecord) -> bool:
        """Whether this instance may take over another's lease on `record` at once: it holds
        the call of the delivery's room (the call moved here, so the lease holder speaks into
        a line nobody listens to), or the holder's heartbeat says it is gone."""
        room_id = record.room_id.split("::", 1)[0]
        held = self.held.get(room_id)
        if held is not None:
            stored = await self.store.get_call(room_id)
            if stored is not None and stored.owner == self.owner:
                return True
        return await self.instance_gone(record.lease_owner)

    async def instance_gone(self, instance_id: str) -> bool:
        """Whether `instance_id`'s heartbeat has expired or was removed (swept)."""
        for instance in await self.store.list_instances():
            if instance.id == instance_id:
                return instance.expires_at < self.wall()
        return True

    async def _write(self, record: CallRecord, held: CallRecord) -> bool:
        if await self.store.swap_call(record, expected_fence=held.fence):
            self.held[record.room_id] = record
            return True
        self.held.pop(record.room_id, None)
        return False


def _continuation(previous: CallRecord | None, owner: str) -> Takeover:
    if previous is None or not previous.state.open:
        return Takeover("new")
    line = dict(previous.line)
    if previous.state is CallState.HANDING_OVER:
        return Takeover("handover", previous.owner, line)
    if previous.owner == owner:
        return Takeover("reconnect", owner, line)
    return Takeover("failover", previous.owner, line)


def _takeovers(previous: CallRecord | None, takeover: Takeover) -> int:
    if previous is None or takeover.continuation == "new":
        return 0
    return previous.takeovers + (takeover.continuation != "reconnect")


class CallAnnouncer(Protocol):
    """A store that announces every call record written (as `RedisStore` does)."""

    def watch_calls(self) -> AsyncIterator[tuple[str, str, int]]: ...


RETRY_SECONDS = 1.0
"""How long to wait before subscribing again after the store dropped the subscription."""


async def follow_calls(
    book: CallBook, store: CallAnnouncer, clock: Clock, taken: Callable[[str], None]
) -> None:
    """Hand each call record written by any instance to `book.noticed` until cancelled,
    and `taken(room_id)` each call held here that another instance took up (it ends here at
    once; missed while disconnected, it ends on the next write of its record here)."""
    while True:
        try:
            async for room_id, owner, fence in store.watch_calls():
                if book.noticed(room_id, owner, fence):
                    taken(room_id)
        except Exception:
            log.exception("lost the call announcements; subscribing again")
        await clock.sleep(RETRY_SECONDS)
