"""Instance loss: hubs sharing one store (the memory store object, or one Redis) stand for
instances. Instance A delegates to a worker that hangs (the process "froze": its heartbeat
stops); once A's heartbeat has expired, a survivor's sweep takes A's tasks over, re-runs or
fails the dispatch per the desk setting, and the caller gets one result saying so. A's late
result, if it ever comes, is dropped (its write loses the fence).

Heartbeats run on the virtual clock (`wall=clock.now`); the sweeps are called by the test.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from tests.orchestration.test_supervisor import GUARD, coordinator, gated_worker
from tests.support.waiting import until
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.store.base import DeliveryRecord, Store, TaskRecord, TaskStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.core.store.redis import RedisStore
from voicehub.errors import ConfigError, StoreError
from voicehub.hub import Hub, HubInstance
from voicehub.orchestration.instances import InstanceHeartbeat
from voicehub.orchestration.recovery import LOST_REASON, OnInstanceLoss, TaskRecovery
from voicehub.orchestration.supervisor import Supervisor
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]

ROOM = "research:caller-1"
INTERVAL, TIMEOUT = 1.0, 3.0


class Handling:
    """The composition side's part, as the server's desks would play it."""

    def __init__(self, hub: Hub, policy: OnInstanceLoss) -> None:
        self.hub, self.policy = hub, policy
        self.opened: list[str] = []

    def on_instance_loss(self, room_id: str) -> OnInstanceLoss:
        return self.policy

    async def open_room(self, room_id: str) -> None:
        self.opened.append(room_id)
        await self.hub.create_room(room_id)

    async def release_room(self, room_id: str) -> None:
        await self.hub.release_room(room_id)


@dataclass
class Instance:
    hub: Hub
    heartbeat: InstanceHeartbeat
    handling: Handling


def quick_worker(agent_id: str) -> Agent:
    llm = ScriptedLLM([{"match": ["*"], "say": f"{agent_id} found: {{message}}"}])
    return Agent(id=agent_id, llm=llm)


class Cluster:
    """Instances on one store; A's workers hang on `gate` until the test opens it."""

    def __init__(self, make_store: Callable[[], Store], clock: VirtualClock) -> None:
        self.make_store, self.clock = make_store, clock
        self.gate = asyncio.Event()
        self.instances: list[Instance] = []

    async def add(
        self, name: str, workers: list[Agent], policy: OnInstanceLoss = "retry", **options: str
    ) -> Instance:
        supervisor = Supervisor(
            coordinator(),
            workers,
            async_delivery=True,
            **options,  # type: ignore[arg-type]
        )
        hub = Hub(
            store=self.make_store(),
            clock=self.clock,
            orchestration=supervisor,
            instance=HubInstance(name, wall=self.clock.now),
        )
        await hub.start()
        handling = Handling(hub, policy)
        recovery = TaskRecovery(hub, handling, instance_id=name, wall=self.clock.now)
        heartbeat = InstanceHeartbeat(hub, recovery, interval=INTERVAL, timeout=TIMEOUT)
        await heartbeat.beat()
        instance = Instance(hub, heartbeat, handling)
        self.instances.append(instance)
        return instance

    async def close(self) -> None:
        self.gate.set()
        for instance in self.instances:
            await asyncio.wait_for(instance.hub.aclose(), GUARD)


@pytest.fixture(params=["memory", "redis"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    clock = VirtualClock(start=1000.0)
    if request.param == "memory":
        shared = MemoryStore()
        made = Cluster(lambda: shared, clock)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = unique_prefix()
        made = Cluster(lambda: RedisStore(server.url, prefix=prefix), clock)
    yield made
    await made.close()


async def delegate_on(a: Instance, words: str = "research tidal power") -> None:
    room = await a.hub.create_room(ROOM)
    text = TextChannel("web")
    await room.attach(text)
    await text.send(room, words)


async def running_tasks(store: Store) -> list[str]:
    return [t.id for t in await store.list_tasks(statuses=[TaskStatus.RUNNING])]


async def deliveries(store: Store) -> list[DeliveryRecord]:
    return await store.list_deliveries(room_id=ROOM)


async def lose(cluster: Cluster, *alive: Instance) -> None:
    """Time passes until every other heartbeat has expired; the `alive` instances beat on
    meanwhile (the others stopped beating: frozen or killed)."""
    for _ in range(int(TIMEOUT / INTERVAL) + 1):
        await cluster.clock.advance(INTERVAL)
        for instance in alive:
            await instance.heartbeat.beat()


async def sweep(instance: Instance) -> list[str]:
    """One sweep, then wait until the reports it started are delivered."""
    lost = await instance.heartbeat.sweep()
    await instance.heartbeat.recovery.wait()
    return lost


async def test_a_survivor_reruns_the_lost_workers_and_the_caller_hears_it_was_restarted(
    cluster: Cluster,
) -> None:
    a = await cluster.add("a", [gated_worker(cluster.gate, "analyst")])
    b = await cluster.add("b", [quick_worker("analyst")])
    await delegate_on(a)
    store = b.hub.store
    await until(lambda: _equals(running_tasks(store), [f"{ROOM}::task-1"]), poll=0.001)
    [task] = await store.list_tasks(parent_room_id=ROOM)
    assert task.owner == "a" and task.metadata["dispatch"]["workers"] == ["analyst"]

    await lose(cluster, b)
    assert await sweep(b) == ["a"]

    [delivery] = await deliveries(store)
    assert delivery.content.startswith("I had to restart the work on tidal power")
    assert delivery.content.endswith("analyst found: tidal power")
    assert delivery.metadata["recovered"] == "retry"
    assert delivery.metadata["lost_instance"] == "a"
    lost, rerun = await store.list_tasks(parent_room_id=ROOM)
    assert (lost.status, lost.owner, lost.reason) == (TaskStatus.FAILED, "b", LOST_REASON)
    assert (rerun.id, rerun.status, rerun.owner) == (f"{ROOM}::task-2", TaskStatus.OK, "b")
    assert rerun.metadata["dispatch"]["restarts"] == 1
    assert b.handling.opened == [ROOM] and ROOM not in b.hub.rooms  # loaded, then released
    assert [i.id for i in await store.list_instances()] == ["b"]

    # A comes back to life: its late result loses the fence and is not delivered again.
    cluster.gate.set()
    await until(lambda: _equals(_count(a.hub.tasks.live), 0), poll=0.001)
    await a.hub.wait_idle()
    assert [d.id for d in await deliveries(store)] == [delivery.id]
    assert (await store.get_task(lost.id)) == lost


async def test_with_fail_the_caller_hears_what_was_lost_and_what_came_back(
    cluster: Cluster,
) -> None:
    workers = [quick_worker("analyst-a"), gated_worker(cluster.gate, "analyst-b")]
    a = await cluster.add("a", workers)
    b = await cluster.add(
        "b", [quick_worker("analyst-a"), quick_worker("analyst-b")], policy="fail"
    )
    await delegate_on(a)
    store = b.hub.store
    await until(lambda: _equals(running_tasks(store), [f"{ROOM}::task-2"]), poll=0.001)

    await lose(cluster, b)
    assert await sweep(b) == ["a"]

    [delivery] = await deliveries(store)
    assert delivery.content.startswith("I'm sorry: the work on tidal power was lost")
    lines = delivery.content.split("\n")[1:]
    assert lines == ["analyst-a found: tidal power", f"analyst-b failed: {LOST_REASON}"]
    assert delivery.metadata["statuses"] == ["ok", "failed"]
    assert b.handling.opened == []  # nothing to run: the room was never loaded on B
    assert len(await store.list_tasks(parent_room_id=ROOM)) == 2


async def test_two_survivors_sweeping_at_once_report_the_dispatch_once(cluster: Cluster) -> None:
    a = await cluster.add("a", [gated_worker(cluster.gate, "analyst")])
    b = await cluster.add("b", [quick_worker("analyst")])
    c = await cluster.add("c", [quick_worker("analyst")])
    await delegate_on(a)
    await until(lambda: _equals(_count(running_tasks(b.hub.store)), 1), poll=0.001)
    await lose(cluster, b, c)

    found = await asyncio.gather(b.heartbeat.sweep(), c.heartbeat.sweep())
    assert ["a"] in found  # both may see A lost; on the memory store one sweep is first
    await asyncio.gather(b.heartbeat.recovery.wait(), c.heartbeat.recovery.wait())
    [delivery] = await deliveries(b.hub.store)
    assert delivery.content.startswith("I had to restart")
    tasks = await b.hub.store.list_tasks(parent_room_id=ROOM)
    assert len(tasks) == 2 and len({t.owner for t in tasks}) == 1  # one survivor did it all


async def test_a_live_instance_is_left_alone(cluster: Cluster) -> None:
    a = await cluster.add("a", [gated_worker(cluster.gate, "analyst")])
    b = await cluster.add("b", [quick_worker("analyst")])
    await delegate_on(a)
    await until(lambda: _equals(_count(running_tasks(b.hub.store)), 1), poll=0.001)
    for _ in range(10):  # both keep beating: nobody is lost, however long the work takes
        await cluster.clock.advance(INTERVAL)
        await asyncio.gather(a.heartbeat.beat(), b.heartbeat.beat())
        assert await b.heartbeat.sweep() == [] and await a.heartbeat.sweep() == []
    cluster.gate.set()
    await until(lambda: _equals(_count(a.hub.tasks.live), 0), poll=0.001)
    await a.hub.wait_idle()
    [delivery] = await deliveries(b.hub.store)
    assert delivery.content == "Dug: found the treasure"


async def test_a_dispatch_restarted_too_often_is_failed(cluster: Cluster) -> None:
    a = await cluster.add("a", [gated_worker(cluster.gate, "analyst")])
    b = await cluster.add("b", [gated_worker(asyncio.Event(), "analyst")])  # hangs too
    c = await cluster.add("c", [gated_worker(asyncio.Event(), "analyst")])
    d = await cluster.add("d", [quick_worker("analyst")])
    await delegate_on(a)
    await until(lambda: _equals(_count(running_tasks(d.hub.store)), 1), poll=0.001)
    alive = [b, c, d]
    for survivor in (b, c):  # each takes the dispatch over, then is lost in turn
        await lose(cluster, *alive)
        assert await survivor.heartbeat.sweep() == [a.hub.instance_id]
        await until(lambda: _equals(_count(running_tasks(d.hub.store)), 1), poll=0.001)
        alive.remove(survivor)
        a = survivor
    await lose(cluster, d)
    assert await sweep(d) == ["c"]
    [delivery] = await deliveries(d.hub.store)
    assert delivery.content.startswith("I'm sorry: the work on tidal power was lost")
    assert delivery.metadata["recovered"] == "fail"


def test_a_heartbeat_timeout_shorter_than_its_interval_is_refused() -> None:
    hub = Hub()
    recovery = TaskRecovery(hub, Handling(hub, "retry"), instance_id="a", wall=time.time)
    with pytest.raises(ConfigError, match=r"interval \(5 s\) must be positive and shorter"):
        InstanceHeartbeat(hub, recovery, interval=5, timeout=2)


async def _equals(value: Awaitable[object], expected: object) -> bool:
    await settle()
    return await value == expected


async def _count(value: Awaitable[list[str]] | dict[str, object]) -> int:
    if isinstance(value, dict):
        return len(value)
    return len(await value)


class FlakyStore(MemoryStore):
    """Fails the next task swap once `fail_next` is set (Redis down mid-sweep, say)."""

    fail_next = False

    async def swap_task(self, task: TaskRecord, *, expected_fence: int) -> bool:
        if self.fail_next:
            self.fail_next = False
            raise StoreError("the store went away")
        return await super().swap_task(task, expected_fence=expected_fence)


async def test_a_sweep_cut_by_a_store_error_reports_what_it_claimed_and_finishes_later() -> None:
    store = FlakyStore()
    cluster = Cluster(lambda: store, VirtualClock(start=1000.0))
    try:
        workers = [gated_worker(cluster.gate, "analyst-a"), gated_worker(cluster.gate, "analyst-b")]
        a = await cluster.add("a", workers)
        b = await cluster.add("b", [quick_worker("analyst-a"), quick_worker("analyst-b")])
        await delegate_on(a)
        await until(lambda: _equals(_count(running_tasks(store)), 2), poll=0.001)
        await lose(cluster, b)

        original = store.swap_task

        async def fail_second(task: TaskRecord, *, expected_fence: int) -> bool:
            store.fail_next = task.id.endswith("task-2")
            return await original(task, expected_fence=expected_fence)

        store.swap_task = fail_second  # type: ignore[method-assign]
        with pytest.raises(StoreError):
            await b.heartbeat.sweep()
        assert [i.id for i in await store.list_instances()] == ["a", "b"]  # A not forgotten
        store.swap_task = original  # type: ignore[method-assign]
        assert await sweep(b) == ["a"]
        assert [i.id for i in await store.list_instances()] == ["b"]
        # task-1 was claimed before the error, task-2 after it: two reports ran, but the
        # caller gets one, with every worker's answer (the lost ones run again)
        [report] = await deliveries(store)
        assert report.content.startswith("I had to restart the work on tidal power")
        assert report.content.split("\n")[1:] == [
            "analyst-a found: tidal power",
            "analyst-b found: tidal power",
        ]
        assert await running_tasks(store) == []
    finally:
        await cluster.close()


async def outage_while_a_works(cluster: Cluster) -> tuple[Instance, Instance]:
    """a runs a task; then the store pauses long enough that every heartbeat expires, and b
    beats first after it: a's expired record is the outage's, not a's loss."""
    a = await cluster.add("a", [gated_worker(cluster.gate, "analyst")])
    b = await cluster.add("b", [quick_worker("analyst")])
    await delegate_on(a)
    await until(lambda: _equals(_count(running_tasks(b.hub.store)), 1), poll=0.001)
    await cluster.clock.advance(TIMEOUT + 2)  # the store paused: neither could beat
    await b.heartbeat.beat()
    assert await b.heartbeat.sweep() == []
    return a, b


async def test_after_a_store_outage_that_stopped_every_beat_nobody_is_lost(
    cluster: Cluster,
) -> None:
    a, b = await outage_while_a_works(cluster)
    for _ in range(int(TIMEOUT / INTERVAL) + 1):  # both beat on, steadily
        await cluster.clock.advance(INTERVAL)
        await asyncio.gather(a.heartbeat.beat(), b.heartbeat.beat())
        assert await b.heartbeat.sweep() == [] and await a.heartbeat.sweep() == []
    assert len(await running_tasks(b.hub.store)) == 1  # the work was never restarted


async def test_a_loss_during_an_outage_is_found_once_the_survivor_beats_steadily(
    cluster: Cluster,
) -> None:
    _, b = await outage_while_a_works(cluster)  # and a died meanwhile
    await lose(cluster, b)  # b beats on for a whole timeout; a never again
    assert await sweep(b) == ["a"]
