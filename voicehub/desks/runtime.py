"""One runtime for every process that runs desks: `voicehub serve` and each LiveKit job.

    runtime = await ProcessRuntime.open(settings, desks, voice)   # the store, opened
    await runtime.start()          # hub, recovery, announcements, heartbeat, voice models
    await runtime.calls.run(call, until_over)
    await runtime.aclose()         # undelivered results stay held in the store

It opens the store the settings choose, builds a `Hub` on it under this instance's id,
the `CallLifecycle` every call of the process runs through (its sessions from `voice`: the
voice stacks), and the instance's heartbeat, whose sweeps take lost instances' tasks over
here with the right desk; on a shared Redis it follows the results and calls other
instances finish or take up. Everything is built when it is opened; `start` sets it
running. The server adds its parts around it (`voicehub.server.parts`); the LiveKit worker
adds livekit's worker API.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.choice import describe_store, open_store
from voicehub.core.store.number_key import load_number_key
from voicehub.core.store.redis import RedisStore
from voicehub.core.tracing import NO_TRACING, Tracer
from voicehub.delivery.announcements import follow_announcements
from voicehub.desks.call_book import CallBook, follow_calls
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.instance_rooms import desk_heartbeat
from voicehub.hub import Hub, HubInstance, new_instance_id

if TYPE_CHECKING:
    from voicehub.core.store.base import Store
    from voicehub.desks.desk import Desk
    from voicehub.desks.runtime_settings import RuntimeSettings
    from voicehub.desks.voice_stack import VoiceStack

__all__ = ["ProcessRuntime"]

log = logging.getLogger("voicehub.runtime")


class ProcessRuntime:
    """Store, hub, call lifecycle and heartbeat of one process (see the module).

    `store` is open (`open` opens the one the settings choose) and `number_key` is its
    secret of caller-number conversation ids. `wrap_store` wraps the store the hub uses
    (the server times its operations); the runtime itself reads and follows the store as
    opened. `desks` are shared (the server's desk reloader swaps changed desks in) and
    closed with it. `instance_id` names this process among the instances (default: the
    settings', else made up): each LiveKit job process is an instance of its own. `tracer`
    makes the hub's spans.
    """

    def __init__(
        self,
        settings: RuntimeSettings,
        desks: dict[str, Desk],
        voice: VoiceStack,
        store: Store,
        *,
        number_key: bytes,
        wrap_store: Callable[[Store], Store] | None = None,
        instance_id: str | None = None,
        tracer: Tracer = NO_TRACING,
    ) -> None:
        self.settings = settings
        self.desks = desks
        self.voice = voice
        self.store = store
        self.number_key = number_key
        instance = instance_id or settings.instance_id or new_instance_id()
        book = CallBook(store, instance, wall=time.time)
        self.hub = Hub(
            store=wrap_store(store) if wrap_store is not None else store,
            orchestration=None,
            instance=HubInstance(
                instance,
                delivery_lease=settings.delivery_lease,
                # a result whose speaker lost its call (or died) is spoken here at once
                lease_breaker=book.lease_breakable,
            ),
            tracer=tracer,
        )
        self.calls = CallLifecycle(self.hub, desks, voice, book=book)
        # takes over lost instances' work once started; beating before the first call
        self.heartbeat = desk_heartbeat(self.hub, desks, self.calls, settings)
        self._followers: list[asyncio.Task[None]] = []

    @classmethod
    async def open(
        cls,
        settings: RuntimeSettings,
        desks: dict[str, Desk],
        voice: VoiceStack,
        *,
        wrap_store: Callable[[Store], Store] | None = None,
        instance_id: str | None = None,
        tracer: Tracer = NO_TRACING,
    ) -> ProcessRuntime:
        """Open the store the settings choose (and its number secret) and build the
        runtime on it; the store is closed again if that fails."""
        store = await open_store(settings)
        try:
            number_key = await load_number_key(settings, store)
        except BaseException:
            await store.close()
            raise
        return cls(
            settings,
            desks,
            voice,
            store,
            number_key=number_key,
            wrap_store=wrap_store,
            instance_id=instance_id,
            tracer=tracer,
        )

    @property
    def instance_id(self) -> str:
        return self.hub.instance_id

    async def peers_alive(self) -> bool:
        """Whether another instance's heartbeat is live (one that can take calls over)."""
        now = self.hub.wall()
        instances = await self.store.list_instances()
        return any(i.id != self.instance_id and i.expires_at > now for i in instances)

    def on_instance_lost(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Call `callback(instance_id)` for each instance found lost, after its tasks were
        taken over (the server takes up its phone calls, the worker its LiveKit rooms)."""
        self.heartbeat.on_lost.append(callback)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, prepare: bool = True) -> None:
        """Start everything; `prepare` loads the desks' voice models now (else on the
        first call)."""
        hub, store = self.hub, self.store
        await hub.start()
        if isinstance(store, RedisStore):  # results finished on other instances
            self._follow(follow_announcements(hub.delivery, store, hub.clock))
        if prepare:
            await self.voice.prepare(list(self.desks.values()))
        for desk in self.desks.values():  # the other desks keep serving
            for problem in self.voice.check(desk):
                log.warning("desk %s: its calls will be refused: %s", desk.name, problem)
        if isinstance(store, RedisStore):  # calls other instances take from this one
            book = self.calls.book
            self._follow(follow_calls(book, store, hub.clock, self.calls.taken_elsewhere))
        self.heartbeat.start()
        await self.heartbeat.beat()
        log.info(
            "instance %s: desks %s on %s",
            hub.instance_id,
            ", ".join(sorted(self.desks)),
            describe_store(self.settings),
        )

    async def aclose(self) -> None:
        """End the calls and stop; undelivered results stay in the store."""
        await self.heartbeat.stop()
        for follower in self._followers:
            await cancel_and_wait(follower)
        self._followers.clear()
        await self.calls.close_all()
        await self.hub.aclose()  # undelivered results stay in the store
        for desk in self.desks.values():
            await desk.aclose()

    def _follow(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self._followers.append(asyncio.create_task(coroutine))
