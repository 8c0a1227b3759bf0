"""Instance heartbeats: each instance says it is alive in the shared store, and the live ones
take over the work of an instance that stopped saying so.

    heartbeat = InstanceHeartbeat(hub, TaskRecovery(hub, handling, ...), interval=2, timeout=10)
    heartbeat.start()

Every `interval` seconds (on the hub clock) the instance writes its record with an expiry
`timeout` seconds ahead on the shared wall clock, then sweeps: any other instance whose
expiry has passed is lost, and its unfinished tasks go to `TaskRecovery.take_over` (claims
are fenced, so of several survivors sweeping at once exactly one acts on each task). The
lost instance's record is then removed. On one SQLite instance the same sweep finds the tasks
a crashed previous run of the server left behind. `on_lost` callbacks run for each lost
instance first (the composition side takes up its calls there).

`timeout` must leave room for a few missed beats: an instance that stalls longer than that
(a long pause of the machine) is taken for lost, and its late results are dropped
(`TaskResult.taken_over`) in favour of the survivor's.

An instance whose own beats stopped for half the timeout or more (the store unreachable or
paused, this process stalled) judges no other instance until it has beaten again without a gap for a
whole `timeout`: every instance missed its beats alike meanwhile, so an expiry seen then is
the outage's, not a loss (a paused Redis otherwise had each instance restart the other's work).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
from collections.abc import Awaitable, Callable

from voicehub.core.jobs import cancel_and_wait
from voicehub.core.store.base import InstanceRecord
from voicehub.errors import ConfigError
from voicehub.orchestration.recovery import TaskRecovery
from voicehub.orchestration.runtime import OrchestrationRuntime

__all__ = ["InstanceHeartbeat"]

log = logging.getLogger("voicehub.instances")


class InstanceHeartbeat:
    """Keeps this instance's heartbeat in the store and sweeps for lost instances."""

    def __init__(
        self,
        hub: OrchestrationRuntime,
        recovery: TaskRecovery,
        *,
        interval: float = 2.0,
        timeout: float = 10.0,
    ) -> None:
        if interval <= 0 or timeout <= interval:
            raise ConfigError(
                f"heartbeat: the interval ({interval:g} s) must be positive and shorter than "
                f"the timeout ({timeout:g} s) after which an instance counts as lost"
            )
        self.hub = hub
        self.recovery = recovery
        self.instance_id = recovery.instance_id
        self.wall: Callable[[], float] = recovery.wall
        self.interval = interval
        self.timeout = timeout
        self.started_at = self.wall()
        self.on_lost: list[Callable[[str], Awaitable[None]]] = []
        self._running: asyncio.Task[None] | None = None
        self._last_beat: float | None = None
        self._steady_since = -math.inf  # beating without a gap since then (at start: trusted)

    async def beat(self) -> None:
        """Write this instance's heartbeat now."""
        now = self.wall()
        record = InstanceRecord(
            id=self.instance_id,
            started_at=self.started_at,
            seen_at=now,
            expires_at=now + self.timeout,
            metadata={"host": socket.gethostname(), "pid": os.getpid()},
        )
        await self.hub.store.beat_instance(record)
        written = self.wall()
        # a gap of half the timeout makes every other expiry suspect; shorter ones are a
        # busy loop's, which must not hold off finding a real loss
        if self._last_beat is not None and written - self._last_beat > self.timeout / 2:
            log.warning(
                "instance %s: no heartbeat for %.1f s; judging no other instance for %g s",
                self.instance_id,
                written - self._last_beat,
                self.timeout,
            )
            self._steady_since = written
        self._last_beat = written

    async def sweep(self) -> list[str]:
        """Take over the tasks of every other instance whose heartbeat expired; returns the
        ids of the instances found lost (none while this instance's own beats are not yet
        steady again after a gap)."""
        now = self.wall()
        if now - self._steady_since < self.timeout:
            return []
        lost = [
            instance.id
            for instance in await self.hub.store.list_instances()
            if instance.id != self.instance_id and instance.expires_at < now
        ]
        for instance_id in lost:
            await self.recovery.take_over(instance_id)
            for callback in self.on_lost:
                try:
                    await callback(instance_id)
                except Exception:  # its calls are tried again by whoever sweeps next
                    log.exception("instance %s: taking up its calls failed", instance_id)
                    return lost
            await self.hub.store.remove_instance(instance_id)
        return lost

    def start(self) -> None:
        """Beat and sweep in the background until `stop()`."""
        if self._running is None:
            self._running = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop beating and reporting. The record stays and expires: whoever sweeps next
        finds nothing left to take over (a clean shutdown finishes its tasks as cancelled)
        and removes it."""
        running, self._running = self._running, None
        if running is not None:
            await cancel_and_wait(running)
        await self.recovery.aclose()

    async def _run(self) -> None:
        while True:
            try:
                await self.beat()
                await self.sweep()
            except Exception:  # the store is down: try again next beat, keep serving calls
                log.exception("instance %s: heartbeat failed", self.instance_id)
            await self.hub.clock.sleep(self.interval)
