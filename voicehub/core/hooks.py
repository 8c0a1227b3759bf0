"""Hooks: code that runs around room events.

SYNC hooks run in priority order (lowest first) and may block an event or replace it with a
modified copy; a SYNC hook that raises is logged and skipped (fail open). ASYNC hooks only
observe: they run in the background and their errors are logged without touching the room.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from voicehub.core.events import Event
from voicehub.core.jobs import TaskSet

if TYPE_CHECKING:
    from voicehub.core.runtime import Runtime

log = logging.getLogger("voicehub.hooks")


class HookTrigger(StrEnum):
    """The moments a hook can run at."""

    BEFORE_BROADCAST = "before_broadcast"
    AFTER_BROADCAST = "after_broadcast"
    ON_TASK_DELEGATED = "on_task_delegated"
    ON_TASK_COMPLETED = "on_task_completed"
    BEFORE_DELIVER = "before_deliver"
    AFTER_DELIVER = "after_deliver"
    ON_PHASE_TRANSITION = "on_phase_transition"
    ON_HANDOFF = "on_handoff"
    ON_HANDOFF_REJECTED = "on_handoff_rejected"
    ON_ROOM_CREATED = "on_room_created"
    ON_ROOM_CLOSED = "on_room_closed"


class HookExecution(StrEnum):
    """SYNC hooks gate and may rewrite; ASYNC hooks observe in the background."""

    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True)
class HookResult:
    """What a SYNC hook decided: allow (optionally with a replacement event) or block."""

    allowed: bool = True
    event: Event | None = None
    reason: str = ""

    @classmethod
    def allow(cls, event: Event | None = None) -> HookResult:
        return cls(True, event)

    @classmethod
    def block(cls, reason: str) -> HookResult:
        return cls(False, None, reason)


@dataclass(frozen=True)
class HookContext:
    """Where a hook runs: the hub, the room, and the trigger."""

    hub: Runtime
    room_id: str
    trigger: HookTrigger


HookFunction = Callable[[Event, HookContext], Awaitable[HookResult | Event | None]]


@dataclass(order=True)
class Hook:
    """A registered hook."""

    priority: int
    order: int
    trigger: HookTrigger = field(compare=False)
    execution: HookExecution = field(compare=False)
    function: HookFunction = field(compare=False)
    name: str = field(compare=False, default="")


@dataclass(frozen=True)
class HookOutcome:
    """The result of running the SYNC hooks of one trigger."""

    event: Event
    blocked: bool = False
    reason: str = ""
    blocked_by: str = ""


class HookRegistry:
    """Hub-wide and room-scoped hooks, kept sorted by priority."""

    def __init__(self) -> None:
        self._global: dict[HookTrigger, list[Hook]] = {}
        self._rooms: dict[str, dict[HookTrigger, list[Hook]]] = {}
        self._order = 0
        self._background = TaskSet("async hooks")

    def add(
        self,
        trigger: HookTrigger,
        function: HookFunction,
        *,
        execution: HookExecution = HookExecution.SYNC,
        priority: int = 0,
        room_id: str | None = None,
        name: str = "",
    ) -> Hook:
        self._order += 1
        hook = Hook(
            priority,
            self._order,
            trigger,
            execution,
            function,
            name or getattr(function, "__name__", "hook"),
        )
        table = self._global if room_id is None else self._rooms.setdefault(room_id, {})
        hooks = table.setdefault(trigger, [])
        hooks.append(hook)
        hooks.sort()
        return hook

    def remove(self, hook: Hook) -> None:
        for table in (self._global, *self._rooms.values()):
            hooks = table.get(hook.trigger)
            if hooks and hook in hooks:
                hooks.remove(hook)

    def drop_room(self, room_id: str) -> None:
        """Forget a room's hooks (the room closed)."""
        self._rooms.pop(room_id, None)

    def has(self, trigger: HookTrigger, room_id: str) -> bool:
        room = self._rooms.get(room_id)
        return bool(self._global.get(trigger)) or bool(room and room.get(trigger))

    def _hooks_for(self, trigger: HookTrigger, room_id: str) -> list[Hook]:
        hooks = self._global.get(trigger, [])
        room = self._rooms.get(room_id)
        room_hooks = room.get(trigger, []) if room else []
        if not room_hooks:
            return hooks
        if not hooks:
            return room_hooks
        return sorted([*hooks, *room_hooks])

    async def run(self, trigger: HookTrigger, event: Event, context: HookContext) -> HookOutcome:
        """Run SYNC hooks in order (they may block or rewrite), then start ASYNC ones."""
        hooks = self._hooks_for(trigger, context.room_id)
        if not hooks:
            return HookOutcome(event)
        for hook in hooks:
            if hook.execution is not HookExecution.SYNC:
                continue
            try:
                result = await hook.function(event, context)
            except Exception:
                # Fail open: a broken gate must not stop every post in the room or lose a
                # delivery. The error is logged with the hook's name; the event goes on.
                log.exception(
                    "sync hook %r failed on %s in room %s; skipped",
                    hook.name,
                    context.trigger,
                    context.room_id,
                )
                continue
            if isinstance(result, Event):
                event = result
            elif isinstance(result, HookResult):
                if not result.allowed:
                    return HookOutcome(event, True, result.reason, hook.name)
                if result.event is not None:
                    event = result.event
        for hook in hooks:
            if hook.execution is HookExecution.ASYNC:
                self._spawn(hook, event, context)
        return HookOutcome(event)

    def _spawn(self, hook: Hook, event: Event, context: HookContext) -> None:
        self._background.start(self._observe(hook, event, context), name=f"hook {hook.name}")

    @staticmethod
    async def _observe(hook: Hook, event: Event, context: HookContext) -> None:
        try:
            await hook.function(event, context)
        except Exception:  # an observer must never break the room
            log.exception(
                "async hook %r failed on %s in room %s", hook.name, context.trigger, context.room_id
            )

    async def drain(self) -> None:
        """Wait for running ASYNC hooks (tests and shutdown)."""
        await self._background.wait()
