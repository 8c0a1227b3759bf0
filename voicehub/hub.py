"""The hub: one per process. It owns rooms, hooks, the store, agents, tasks and delivery.

It is the composition side of the runtime: it builds delegation and delivery on top of the
core, and the layers below see it only through `voicehub.core.runtime.Runtime` and
`voicehub.orchestration.runtime.OrchestrationRuntime`."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from voicehub.agents.agent import Agent
from voicehub.core.channels import Channel
from voicehub.core.clock import Clock, SystemClock
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.core.hooks import (
    HookContext,
    HookExecution,
    HookFunction,
    HookOutcome,
    HookRegistry,
    HookTrigger,
)
from voicehub.core.jobs import BackgroundJobs
from voicehub.core.room import Room, closed_message
from voicehub.core.store.base import RoomRecord, RoomStatus, Store
from voicehub.core.store.memory import MemoryStore
from voicehub.core.tracing import NO_TRACING, TRACE_KEY, Tracer
from voicehub.delivery.policy import DeliveryStrategy, StrategyLike, parse_strategy
from voicehub.delivery.service import DeliveryService, LeaseBreaker
from voicehub.errors import RoomClosedError, RoomNotFoundError, UnknownAgentError
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.delegation import Delegation, TaskHandle

__all__ = ["DEFAULT", "Hub", "HubInstance", "new_instance_id"]

log = logging.getLogger("voicehub.hub")


def new_instance_id() -> str:
    """A made-up name for a process that was given none."""
    return f"instance-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class HubInstance:
    """This process as one instance among those sharing a store. `id` names it in task
    records, delivery leases and heartbeats; `wall` is the epoch clock those compare across
    processes; `delivery_lease` how long a claim to speak a result lasts without renewal;
    `lease_breaker`, when given, is asked whether another instance's lease on a result may
    be taken over at once (`voicehub.desks.call_book.CallBook.lease_breakable`)."""

    id: str = field(default_factory=new_instance_id)
    wall: Callable[[], float] = time.time
    delivery_lease: float = 15.0
    lease_breaker: LeaseBreaker | None = None


class _Default:
    """Marker: use the hub's default orchestration."""


DEFAULT: Any = _Default()


class Hub:
    """The runtime: rooms, channels, agents, hooks, store, delegation and delivery.

    `max_concurrent_tasks` and `max_tasks_per_room` bound delegated work; extra tasks queue.
    `delivery_strategy` is the desk default used by `deliver` when none is given.
    `instance` is this process among those sharing a store (`HubInstance`: its id, wall
    clock and delivery leases; a made-up id by default). `tracer` makes spans around tool
    calls and tasks (`voicehub.telemetry` gives one; none by default).
    Agents are looked up per room: a room reaches its orchestration's agents (a child room
    its root's), then those registered with `register_agent`, so two desks served by one
    hub may use the same agent id.
    """

    def __init__(
        self,
        *,
        store: Store | None = None,
        orchestration: Orchestration | None = None,
        delivery_strategy: StrategyLike = "wait_for_idle",
        clock: Clock | None = None,
        max_concurrent_tasks: int = 64,
        max_tasks_per_room: int = 16,
        task_timeout: float | None = None,
        instance: HubInstance | None = None,
        tracer: Tracer = NO_TRACING,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock: Clock = clock or SystemClock()
        self.instance = instance if instance is not None else HubInstance()
        self.hooks = HookRegistry()
        self.tracer = tracer
        self.orchestration = orchestration
        self.agents: dict[str, Agent] = {}
        self.jobs = BackgroundJobs()
        self._rooms: dict[str, Room] = {}
        self._room_orchestrations: dict[str, Orchestration] = {}
        self._room_agents: dict[str, dict[str, Agent]] = {}
        self.tasks: Delegation = Delegation(
            self,
            max_concurrent=max_concurrent_tasks,
            max_per_room=max_tasks_per_room,
            default_timeout=task_timeout,
            owner=self.instance_id,
        )
        self.delivery: DeliveryService = DeliveryService(
            self,
            default_strategy=delivery_strategy,
            wall=self.wall,
            owner=self.instance_id,
            lease=self.instance.delivery_lease,
            lease_breaker=self.instance.lease_breaker,
        )

    @property
    def instance_id(self) -> str:
        """This process's name among the instances sharing the store."""
        return self.instance.id

    @property
    def wall(self) -> Callable[[], float]:
        """The epoch clock instances compare leases and heartbeats on."""
        return self.instance.wall

    @property
    def delivery_strategy(self) -> DeliveryStrategy:
        """The default strategy of `deliver` (the delivery service's)."""
        return self.delivery.default_strategy

    @delivery_strategy.setter
    def delivery_strategy(self, strategy: StrategyLike) -> None:
        self.delivery.default_strategy = parse_strategy(strategy)

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> Hub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Start background services: the delivery service reloads unfinished results."""
        await self.delivery.start()

    async def aclose(self) -> None:
        """Cancel running tasks, stop delivery, close the store. Undelivered results stay."""
        for room_id in {*self._rooms}:
            await self.jobs.cancel_room(room_id)
        await self.tasks.cancel_all()
        await self.delivery.aclose()
        await self.hooks.drain()
        await self.store.close()

    # -- agents --------------------------------------------------------------------------

    def register_agent(self, agent: Agent) -> None:
        """Make `agent` reachable by id from every room (after the room's own agents)."""
        self.agents[agent.id] = agent

    def agents_of(self, room_id: str | None) -> Mapping[str, Agent]:
        """The agents `room_id` reaches by id: its orchestration's (a child room uses its
        root room's), then the registered ones; with None, only the registered ones."""
        own = self._room_agents.get(_root_id(room_id)) if room_id is not None else None
        if not own:
            return self.agents
        return {**self.agents, **own}

    def agent(self, agent_id: str, room_id: str | None = None) -> Agent:
        """The agent `agent_id` as seen from `room_id`; raises UnknownAgentError."""
        reachable = self.agents_of(room_id)
        try:
            return reachable[agent_id]
        except KeyError:
            known = ", ".join(sorted(reachable)) or "none"
            where = f" in room {room_id!r}" if room_id is not None else ""
            raise UnknownAgentError(
                f"unknown agent {agent_id!r}{where}; known agents: {known}"
            ) from None

    # -- rooms ---------------------------------------------------------------------------

    @property
    def rooms(self) -> dict[str, Room]:
        """Rooms live in memory now (closed rooms are only in the store)."""
        return self._rooms

    def room(self, room_id: str) -> Room:
        room = self._rooms.get(room_id)
        if room is None:
            raise RoomNotFoundError(f"no open room {room_id!r}")
        return room

    async def create_room(
        self,
        room_id: str | None = None,
        *,
        parent_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        orchestration: Orchestration | None = DEFAULT,
    ) -> Room:
        """Open a new room, or reopen a stored one with the same id (a reconnecting call).

        `orchestration` defaults to the hub's; pass None to run the room without one.
        """
        if room_id is None:
            room_id = f"room-{uuid.uuid4().hex[:12]}"
        if room_id in self._rooms:
            return self._rooms[room_id]
        stored = await self.store.get_room(room_id)
        if stored is None:
            record = RoomRecord(id=room_id, parent_id=parent_id, metadata=dict(metadata or {}))
            await self.store.create_room(record)
            room = Room(self, record)
        else:
            stored = stored.model_copy(update={"status": RoomStatus.OPEN, "closed_at": None})
            if metadata:
                stored.metadata.update(metadata)
            await self.store.update_room(stored)
            room = Room(self, stored, await self.store.last_seq(room_id))
        self._rooms[room_id] = room
        chosen = self.orchestration if orchestration is DEFAULT else orchestration
        if chosen is not None:
            self._room_orchestrations[room_id] = chosen
            self._room_agents[room_id] = {agent.id: agent for agent in chosen.agents()}
            await chosen.install(self, room_id)
        await self._system_hooks(HookTrigger.ON_ROOM_CREATED, room_id, "room opened")
        return room

    async def create_child_room(
        self, parent_id: str, room_id: str, *, metadata: dict[str, Any] | None = None
    ) -> Room:
        """Open a new child room with no orchestration. Unlike `create_room` it never reopens
        a stored room: child ids are unique, so the store lookup is skipped."""
        if parent_id not in self._rooms:
            raise RoomNotFoundError(f"no open room {parent_id!r} to open child {room_id!r} in")
        record = RoomRecord(id=room_id, parent_id=parent_id, metadata=dict(metadata or {}))
        await self.store.create_room(record)
        room = self._rooms[room_id] = Room(self, record)
        await self._system_hooks(HookTrigger.ON_ROOM_CREATED, room_id, "room opened")
        return room

    def orchestration_of(self, room_id: str) -> Orchestration | None:
        return self._room_orchestrations.get(room_id)

    async def close_room(self, room_id: str) -> None:
        """Close a room: cancel its tasks, unbind channels, persist, drop it from memory."""
        room = self._rooms.get(room_id)
        if room is None:
            return
        if self.jobs.of_room(room_id):  # a child room has none: no gather for nothing
            await self.jobs.cancel_room(room_id)
        await self.tasks.cancel_room(room_id)
        room.status = RoomStatus.CLOSED
        for channel_id in list(room.channels):
            await room.detach(channel_id)
        await self.store.update_room(room.record())
        await self._system_hooks(HookTrigger.ON_ROOM_CLOSED, room_id, "room closed")
        self._rooms.pop(room_id, None)
        self._room_orchestrations.pop(room_id, None)
        self._room_agents.pop(room_id, None)
        self.hooks.drop_room(room_id)

    async def release_room(self, room_id: str) -> bool:
        """Unload a room from memory but keep it open in the store, so the conversation can
        resume later with `create_room(room_id)` (a call that ended, say). Returns False, and
        keeps the room, while it still has delegated tasks or background jobs running."""
        room = self._rooms.get(room_id)
        if room is None:
            return True
        if self.tasks.of_room(room_id) or self.jobs.of_room(room_id):
            return False
        for channel_id in list(room.channels):
            await room.detach(channel_id)
        await self.store.update_room(room.record())
        self._rooms.pop(room_id, None)
        self._room_orchestrations.pop(room_id, None)
        self._room_agents.pop(room_id, None)
        self.hooks.drop_room(room_id)
        self.tasks.forget_room(room_id)
        return True

    async def attach(self, room_id: str, channel: Channel) -> None:
        await self.room(room_id).attach(channel)

    async def post(self, room_id: str, event: Event) -> Event | None:
        """Append and broadcast `event` in `room_id`.

        Raises RoomClosedError if the room was closed, RoomNotFoundError if it never existed.
        """
        room = self._rooms.get(room_id)
        if room is None:
            stored = await self.store.get_room(room_id)
            if stored is not None and stored.status is RoomStatus.CLOSED:
                raise RoomClosedError(closed_message(room_id))
            room = self.room(room_id)
        return await room.post(event)

    async def history(self, room_id: str, limit: int | None = None) -> list[Event]:
        """The room's events from the store, oldest first."""
        if limit is None:
            return await self.store.list_events(room_id)
        return await self.store.recent_events(room_id, limit)

    # -- hooks ---------------------------------------------------------------------------

    def hook(
        self,
        trigger: HookTrigger,
        *,
        execution: HookExecution = HookExecution.SYNC,
        priority: int = 0,
        room_id: str | None = None,
    ) -> Callable[[HookFunction], HookFunction]:
        """Decorator registering a hub-wide (or, with `room_id`, room-scoped) hook."""

        def register(function: HookFunction) -> HookFunction:
            self.hooks.add(
                trigger, function, execution=execution, priority=priority, room_id=room_id
            )
            return function

        return register

    async def _system_hooks(self, trigger: HookTrigger, room_id: str, text: str) -> None:
        # the event is built only when a hook will see it (rooms open and close per task)
        if self.hooks.has(trigger, room_id):
            await self.run_hooks(trigger, _system_event(room_id, text))

    async def run_hooks(self, trigger: HookTrigger, event: Event) -> HookOutcome:
        room_id = event.room_id
        if not self.hooks.has(trigger, room_id):
            return HookOutcome(event)
        return await self.hooks.run(trigger, event, HookContext(self, room_id, trigger))

    # -- delegation and delivery ---------------------------------------------------------

    async def delegate(
        self,
        agent: Agent | str,
        task: str,
        parent_room: str | Room,
        *,
        share_channels: Sequence[str] | None = None,
        timeout: float | None = None,
        metadata: dict[str, Any] | None = None,
        stop_tools: Sequence[str] = (),
    ) -> TaskHandle:
        """Run `agent` on `task` in a new child room `<parent>::task-<n>`; returns at once."""
        parent_id = parent_room.id if isinstance(parent_room, Room) else parent_room
        if isinstance(agent, str):
            agent = self.agent(agent, parent_id)
        return await self.tasks.delegate(
            agent,
            task,
            parent_id,
            share_channels=share_channels,
            timeout=timeout,
            metadata=metadata,
            stop_tools=stop_tools,
        )

    async def deliver(
        self,
        room_id: str,
        content: str,
        strategy: StrategyLike | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        delivery_id: str | None = None,
    ) -> str:
        """Hand a result to the delivery service, to be spoken into `room_id` at the right
        moment with `strategy` (the desk default when None). Returns the delivery id.
        With tracing on, the record keeps the trace context of the work that produced it
        (the dispatch of its workers), so its speaking continues that trace anywhere."""
        if self.tracer.enabled and TRACE_KEY not in (metadata or {}):
            metadata = {**(metadata or {}), TRACE_KEY: self.tracer.carrier(room_id)}
        return await self.delivery.deliver(
            room_id, content, strategy=strategy, metadata=metadata, delivery_id=delivery_id
        )

    async def wait_idle(self) -> None:
        """Wait until background jobs and hooks have finished (tests, shutdown)."""
        await asyncio.sleep(0)
        await self.jobs.wait()
        await self.hooks.drain()


def _system_event(room_id: str, text: str) -> Event:
    return Event(
        kind=EventKind.SYSTEM,
        text=text,
        source="hub",
        role="system",
        source_type=ChannelType.SYSTEM,
        room_id=room_id,
    )


def _root_id(room_id: str) -> str:
    """Child rooms are `<parent>::task-<n>`; agents are looked up in the root room."""
    return room_id.split("::", 1)[0]
