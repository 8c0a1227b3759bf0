"""What a live session offers the delivery service: the `Injector` it speaks through and the
`ActivityFeed` it watches, plus the text-room injector that posts a message at once."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from voicehub.core.events import ChannelType, Event, EventKind

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.runtime import Runtime
    from voicehub.delivery.policy import ActivityState


class InjectOutcome(StrEnum):
    """How an injection ended. Only FINISHED uses a result up: the others requeue it
    without counting against its attempts (an interruption is the caller's turn, not a
    fault)."""

    FINISHED = "finished"
    INTERRUPTED = "interrupted"
    DEFERRED = "deferred"  # nothing was spoken: the caller's voice held it at the last check
    DECLINED = "declined"  # offered ("shall I read them?"), and the caller did not say yes


class Injector(Protocol):
    """Speaks a result into a live session.

    `inject` returns only when the speech is over: FINISHED when it played to the end (the
    transport confirmed playout), INTERRUPTED when the caller cut it off. It raises on
    failure. `allow_interrupt` lets it cut the agent's own speech (the Immediate strategy).
    """

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome: ...


@runtime_checkable
class PreparingInjector(Injector, Protocol):
    """An injector that can get a result ready while it waits (pre-rendered speech).

    The service calls `prepare` for each pending item and `discard` once it is settled;
    `inject` then receives the item ids in `metadata["delivery_ids"]`, and with
    `metadata["offer"]` set it should first offer the result ("shall I read them?") and
    speak it only on a yes (else DECLINED).
    """

    def prepare(self, delivery_id: str, text: str) -> None: ...

    def discard(self, delivery_id: str) -> None: ...


class ActivityFeed(Protocol):
    """What the delivery driver reads from a room's activity (VoiceActivity satisfies it)."""

    @property
    def version(self) -> int: ...

    def snapshot(self) -> ActivityState: ...

    async def wait_for_change(self, after_version: int) -> Any: ...


class TextInjector:
    """Delivers into a text room by posting the result as a delivery message now."""

    def __init__(self, hub: Runtime, room_id: str) -> None:
        self.hub = hub
        self.room_id = room_id

    async def inject(
        self, text: str, *, allow_interrupt: bool, metadata: dict[str, Any]
    ) -> InjectOutcome:
        await self.hub.post(
            self.room_id,
            Event(
                kind=EventKind.DELIVERY,
                text=text,
                source="delivery",
                role="assistant",
                source_type=ChannelType.SYSTEM,
                metadata=metadata,
            ),
        )
        return InjectOutcome.FINISHED


class AlwaysIdle:
    """Activity of a room with no voice: live and idle since it was attached."""

    def __init__(self, clock: Clock) -> None:
        self.user_speaking = False
        self.is_idle = True
        self.idle_since: float | None = clock.now()
        self.session_live = True
        self.caller_voiced_at: float | None = None  # no caller audio in a text room
        self.version = 0

    def snapshot(self) -> AlwaysIdle:
        return self

    async def wait_for_change(self, after_version: int) -> Any:
        await asyncio.Event().wait()  # a text room's activity never changes


class SessionRegistry(Protocol):
    """Where a live voice session registers for delivery (the `DeliveryService`)."""

    async def attach(self, room_id: str, injector: Injector, activity: ActivityFeed) -> None:
        """The room's call went live: results may be spoken through `injector`."""
        ...

    async def detach(self, room_id: str) -> None:
        """The call ended: hold what is left for the next one."""
        ...
