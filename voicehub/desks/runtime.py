"""One runtime for every process that runs desks: `voicehub serve` and each LiveKit job.

    runtime = ProcessRuntime(settings, desks, factory)
    await runtime.start()          # store, hub, heartbeat, recovery, announcements
    await runtime.calls.run(call, until_over)
    await runtime.aclose()         # undelivered results stay held in the store

It opens the store the settings choose, runs a `Hub` on it under this instance's id, writes
the instance's heartbeat and sweeps for lost instances (their tasks are taken over here with
the right desk), follows the results other instances finish (on a shared Redis), and owns
the `CallLifecycle` every call of the process runs through. The server adds its HTTP routes
around it; the LiveKit worker adds livekit's worker API.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.choice import describe_store, open_store
from voicehub.core.store.number_key import load_number_key
from voicehub.core.store.redis import RedisStore
from voicehub.delivery.announcements import follow_announcements
from voicehub.desks.call_book import CallBook, follow_calls
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.instance_rooms import start_heartbeat
from voicehub.errors import VoicehubError
from voicehub.hub import Hub

if TYPE_CHECKING:
    from voicehub.core.store.base import Store
    from voicehub.desks.desk import Desk
    from voicehub.desks.runtime_settings import RuntimeSettings
    from voicehub.desks.voice_stack import SessionFactory
    from voicehub.orchestration.instances import InstanceHeartbeat

__all__ = ["ProcessRuntime"]

log = logging.getLogger("voicehub.runtime")


class ProcessRuntime:
    """Store, hub, heartbeat, recovery, announcements and call lifecycle of one process.

    `wrap_store` wraps the store the hub uses (the server times its operations); the
    runtime itself reads and follows the store as opened. `desks` are closed with it.
    `instance_id` names this process among the instances (default: the settings', else
    made up): each LiveKit job process is an instance of its own.
    """

    def __init__(
        self,
        settings: RuntimeSettings,
        desks: dict[str, Desk],
        factory: SessionFactory,
        *,
        wrap_store: Callable[[Store], Store] | None = None,
        instance_id: str | None = None,
    ) -> None:
        self.settings = settings
        self._instance_id = instance_id or settings.instance_id
        self.desks = desks  # shared: the server's desk reloader swaps changed desks in
        self.factory = factory
        self._wrap_store = wrap_store
        self._store: Store | None = None
        self._hub: Hub | None = None
        self._calls: CallLifecycle | None = None
        self._heartbeat: InstanceHeartbeat | None = None
        self._followers: list[asyncio.Task[None]] = []
        self.number_key = b""

    # -- what it runs ------------------------------------------------------------------------

    @property
    def hub(self) -> Hub:
        if self._hub is None:
            raise VoicehubError("the process runtime is not started")
        return self._hub

    @property
    def calls(self) -> CallLifecycle:
        if self._calls is None:
            raise VoicehubError("the process runtime is not started")
        return self._calls

    @property
    def store(self) -> Store:
        """The store as opened (not wrapped)."""
        if self._store is None:
            raise VoicehubError("the process runtime is not started")
        return self._store

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
        if self._heartbeat is None:
            raise VoicehubError("the process runtime is not started")
        self._heartbeat.on_lost.append(callback)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, *, prepare: bool = True) -> None:
        """Open the store and start everything; `prepare` loads the desks' voice models now
        (else on the first call)."""
        settings = self.settings
        store = self._store = await open_store(settings)
        hub = self._hub = Hub(
            store=self._wrap_store(store) if self._wrap_store is not None else store,
            orchestration=None,
            instance_id=self._instance_id,
            delivery_lease=settings.delivery_lease,
        )
        await hub.start()
        if isinstance(store, RedisStore):  # results finished on other instances
            self._follow(follow_announcements(hub.delivery, store, hub.clock))
        if prepare:
            await self.factory.prepare(self.desks.values())
        book = CallBook(store, hub.instance_id, wall=hub.wall)
        self._calls = CallLifecycle(hub, self.desks, self.factory, book=book)
        # a result whose speaker lost its call (or died) is spoken here at once
        hub.delivery.lease_breaker = book.lease_breakable
        if isinstance(store, RedisStore):  # calls other instances take from this one
            self._follow(follow_calls(book, store, hub.clock))
        self.number_key = await load_number_key(settings, store)
        # takes over lost instances' work, from here on; beating before the first call
        self._heartbeat = start_heartbeat(hub, self.desks, self._calls, settings)
        await self._heartbeat.beat()
        log.info(
            "instance %s: desks %s on %s",
            hub.instance_id,
            ", ".join(sorted(self.desks)),
            describe_store(settings),
        )

    async def aclose(self) -> None:
        """End the calls and stop; undelivered results stay in the store."""
        if self._heartbeat is not None:
            await self._heartbeat.stop()
        for follower in self._followers:
            await cancel_and_wait(follower)
        self._followers.clear()
        if self._calls is not None:
            await self._calls.close_all()
        if self._hub is not None:
            await self._hub.aclose()  # undelivered results stay in the store
        for desk in self.desks.values():
            await desk.aclose()

    def _follow(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self._followers.append(asyncio.create_task(coroutine))
