"""What the layers below the hub need of it, as a protocol.

`voicehub.hub.Hub` composes rooms, the store, hooks, delegation and delivery; it sits above
`core`, `agents`, `orchestration` and `delivery`. Those layers see it only through small
protocols, so none of them imports the hub: this one (rooms, store, hooks, clock, jobs, posting
an event), `voicehub.orchestration.runtime.OrchestrationRuntime` (adds delegation, delivery and
agent lookup) and what the delivery service takes in its constructor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.events import Event
    from voicehub.core.hooks import HookOutcome, HookRegistry, HookTrigger
    from voicehub.core.jobs import BackgroundJobs
    from voicehub.core.room import Room
    from voicehub.core.store.base import Store
    from voicehub.core.tracing import Tracer


class Runtime(Protocol):
    """Rooms, store, hooks, clock and background jobs of one process."""

    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def hooks(self) -> HookRegistry: ...

    @property
    def jobs(self) -> BackgroundJobs: ...

    @property
    def tracer(self) -> Tracer:
        """Spans around tool calls and tasks (`voicehub.core.tracing`; off by default)."""
        ...

    @property
    def rooms(self) -> Mapping[str, Room]:
        """The rooms open in memory."""
        ...

    def room(self, room_id: str) -> Room:
        """The open room `room_id`; raises RoomNotFoundError."""
        ...

    async def post(self, room_id: str, event: Event) -> Event | None:
        """Append and broadcast `event`; None when a hook blocked it."""
        ...

    async def run_hooks(self, trigger: HookTrigger, event: Event) -> HookOutcome: ...

    async def create_child_room(
        self, parent_id: str, room_id: str, *, metadata: dict[str, Any] | None = None
    ) -> Room: ...

    async def close_room(self, room_id: str) -> None: ...
