"""Delegation: tasks in child rooms, their results, limits, timeouts and cleanup."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.llm import ChatMessage, LLMChunk, ToolChoice, ToolSpec
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.store.base import RoomStatus, TaskStatus
from voicehub.core.store.memory import MemoryStore
from voicehub.errors import RoomNotFoundError, VoicehubError
from voicehub.hub import Hub
from voicehub.orchestration.delegation import INTERNAL_REASON, TaskHandle, TaskResult

# A safety net so a regression fails instead of hanging; behaviour never waits on it.
GUARD = 5.0


async def result_of(handle: TaskHandle) -> TaskResult:
    return await asyncio.wait_for(handle.result(), GUARD)


def answering(agent_id: str, answer: str) -> Agent:
    return Agent(id=agent_id, llm=ScriptedLLM([{"match": ["*"], "say": answer}]))


def calling(agent_id: str, tool: Tool, reply: str = "{result}") -> Agent:
    llm = ScriptedLLM([{"match": ["*"], "tool": tool.name, "reply": reply}])
    return Agent(id=agent_id, llm=llm, tools=(tool,))


class Gate:
    """A tool that blocks until released, counting how many calls run at once."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.running = 0
        self.most = 0
        self.rooms: list[str] = []

    def tool(self) -> Tool:
        async def wait_for_gate(context: ToolContext) -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            self.rooms.append(context.room_id)
            try:
                await self.open.wait()
            finally:
                self.running -= 1
            return f"done in {context.room_id}"

        return Tool(wait_for_gate)


class BrokenLLM:
    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        raise RuntimeError("model endpoint is down")
        yield  # pragma: no cover  (makes this an async generator)


async def test_ok_result() -> None:
    hub = Hub()
    await hub.create_room("call")
    handle = await hub.delegate(answering("researcher", "Tides follow the moon."), "tides?", "call")
    assert handle.task_id == "call::task-1"
    assert handle.child_room_id == "call::task-1"

    result = await result_of(handle)
    assert result.ok
    assert result.status is TaskStatus.OK
    assert (result.agent_id, result.parent_room_id) == ("researcher", "call")
    assert result.output == "Tides follow the moon."
    assert result.describe() == "Tides follow the moon."
    assert handle.status is TaskStatus.OK
    assert handle.done()
    record = await hub.store.get_task(handle.task_id)
    assert record is not None
    assert (record.status, record.output, record.input) == (TaskStatus.OK, result.output, "tides?")
    assert record.finished_at is not None


async def test_handle_is_awaitable_and_agents_can_be_named() -> None:
    hub = Hub()
    hub.register_agent(answering("researcher", "yes"))
    await hub.create_room("call")
    room = hub.room("call")
    result = await asyncio.wait_for(await hub.delegate("researcher", "q", room), GUARD)
    assert result.output == "yes"


async def test_the_worker_runs_its_tools_in_the_child_room() -> None:
    hub = Hub()
    await hub.create_room("call")

    def where(context: ToolContext) -> str:
        return f"I am in {context.room_id} as {context.agent_id}"

    handle = await hub.delegate(calling("w", Tool(where)), "where are you?", "call")
    result = await result_of(handle)
    assert result.output == "I am in call::task-1 as w"
    ((call, outcome),) = result.tool_calls
    assert (call.name, outcome.is_error) == ("where", False)
    child_events = await hub.history("call::task-1")
    assert [(e.kind, e.text) for e in child_events] == [
        (EventKind.MESSAGE, "where are you?"),
        (EventKind.TOOL_CALL, "{}"),
        (EventKind.TOOL_RESULT, "I am in call::task-1 as w"),
        (EventKind.MESSAGE, "I am in call::task-1 as w"),
    ]


async def test_task_hooks_fire() -> None:
    hub = Hub()
    seen: list[tuple[HookTrigger, str, dict[str, object]]] = []

    @hub.hook(HookTrigger.ON_TASK_DELEGATED)
    async def delegated(event: Event, ctx: HookContext) -> None:
        seen.append((ctx.trigger, event.text, event.metadata))

    @hub.hook(HookTrigger.ON_TASK_COMPLETED)
    async def completed(event: Event, ctx: HookContext) -> None:
        seen.append((ctx.trigger, event.text, event.metadata))

    await hub.create_room("call")
    await result_of(await hub.delegate(answering("w", "answer"), "question", "call"))
    ids = {"task_id": "call::task-1", "agent_id": "w"}
    assert seen == [
        (HookTrigger.ON_TASK_DELEGATED, "question", ids),
        (HookTrigger.ON_TASK_COMPLETED, "answer", {**ids, "status": "ok"}),
    ]


async def test_a_worker_whose_llm_raises_fails_with_a_reason() -> None:
    hub = Hub()
    await hub.create_room("call")
    handle = await hub.delegate(Agent(id="w", llm=BrokenLLM()), "anything", "call")
    result = await result_of(handle)
    assert result.status is TaskStatus.FAILED
    assert not result.ok
    # The caller hears that it failed, not the exception (written for operators).
    assert result.reason == INTERNAL_REASON
    assert result.describe() == f"w failed: {INTERNAL_REASON}"
    assert result.detail == "RuntimeError: model endpoint is down"
    assert "Traceback" not in result.detail
    record = await hub.store.get_task(handle.task_id)
    assert record is not None
    assert (record.status, record.reason) == (TaskStatus.FAILED, result.reason)
    # The failed worker's room is archived too.
    child = await hub.store.get_room(handle.child_room_id)
    assert child is not None
    assert child.status is RoomStatus.CLOSED


async def test_a_worker_without_llm_fails_with_a_clear_reason() -> None:
    hub = Hub()
    await hub.create_room("call")
    result = await result_of(await hub.delegate(Agent(id="w"), "anything", "call"))
    assert result.status is TaskStatus.FAILED
    assert "has no llm" in result.detail
    assert "has no llm" not in result.describe()


async def test_timeout_on_the_hub_clock() -> None:
    clock = VirtualClock()
    hub = Hub(clock=clock)
    await hub.create_room("call")

    async def slow_lookup() -> str:
        await clock.sleep(100)
        return "too late"

    handle = await hub.delegate(calling("w", Tool(slow_lookup)), "look it up", "call", timeout=10)
    await clock.advance(9.5)
    assert not handle.done()
    assert handle.status is TaskStatus.RUNNING
    await clock.advance(0.5)
    result = await result_of(handle)
    assert result.status is TaskStatus.TIMED_OUT
    assert result.reason == "no result within 10 s"
    assert result.describe() == "w timed out: no result within 10 s"
    child = await hub.store.get_room(handle.child_room_id)
    assert child is not None
    assert child.status is RoomStatus.CLOSED
    assert hub.tasks.live == {}
    assert clock.next_deadline() is None  # nothing left sleeping


async def test_hub_default_timeout_applies() -> None:
    clock = VirtualClock()
    hub = Hub(clock=clock, task_timeout=3)
    await hub.create_room("call")

    async def slow_lookup() -> str:
        await clock.sleep(100)
        return "too late"

    handle = await hub.delegate(calling("w", Tool(slow_lookup)), "x", "call")
    await clock.advance(3)
    assert (await result_of(handle)).status is TaskStatus.TIMED_OUT


async def test_work_that_beats_the_timeout_is_ok() -> None:
    clock = VirtualClock()
    hub = Hub(clock=clock)
    await hub.create_room("call")

    async def quick_lookup() -> str:
        await clock.sleep(2)
        return "found"

    handle = await hub.delegate(calling("w", Tool(quick_lookup)), "x", "call", timeout=10)
    await clock.advance(2)
    result = await result_of(handle)
    assert (result.status, result.output) == (TaskStatus.OK, "found")
    assert clock.next_deadline() is None  # the watchdog was cancelled


async def test_a_cancelled_task_is_cancelled() -> None:
    hub = Hub()
    gate = Gate()
    await hub.create_room("call")
    handle = await hub.delegate(calling("w", gate.tool()), "wait", "call")
    await settle()
    assert gate.running == 1
    assert handle.cancel()
    result = await result_of(handle)
    assert result.status is TaskStatus.CANCELLED
    assert result.reason
    assert gate.running == 0
    assert not handle.cancel()  # already finished
    record = await hub.store.get_task(handle.task_id)
    assert record is not None
    assert record.status is TaskStatus.CANCELLED
    assert "call::task-1" not in hub.rooms


async def test_cancelling_a_task_with_a_timeout_is_cancelled_not_timed_out() -> None:
    clock = VirtualClock()
    hub = Hub(clock=clock)
    gate = Gate()
    await hub.create_room("call")
    handle = await hub.delegate(calling("w", gate.tool()), "wait", "call", timeout=10)
    await settle()
    handle.cancel()
    assert (await result_of(handle)).status is TaskStatus.CANCELLED
    assert clock.next_deadline() is None  # the watchdog went with it


async def test_a_task_cancelled_before_it_starts_is_cancelled() -> None:
    hub = Hub()
    await hub.create_room("call")
    handle = await hub.delegate(answering("w", "never said"), "x", "call")
    assert handle.cancel()  # at once: the runner has not taken a step yet
    result = await result_of(handle)
    assert result.status is TaskStatus.CANCELLED
    assert hub.tasks.live == {}
    record = await hub.store.get_task(handle.task_id)
    assert record is not None
    assert record.status is TaskStatus.CANCELLED


async def test_cancel_by_id() -> None:
    hub = Hub()
    gate = Gate()
    await hub.create_room("call")
    handle = await hub.delegate(calling("w", gate.tool()), "wait", "call")
    await settle()
    assert await hub.tasks.cancel(handle.task_id)
    assert handle.status is TaskStatus.CANCELLED
    assert not await hub.tasks.cancel(handle.task_id)
    assert not await hub.tasks.cancel("no-such-task")


async def test_concurrency_limit_is_honoured() -> None:
    hub = Hub(max_concurrent_tasks=2)
    gate = Gate()
    await hub.create_room("call")
    worker = calling("w", gate.tool())
    handles = [await hub.delegate(worker, f"job {i}", "call") for i in range(5)]
    await settle()

    assert gate.running == 2
    statuses = [h.status for h in handles]
    assert statuses.count(TaskStatus.RUNNING) == 2
    assert statuses.count(TaskStatus.QUEUED) == 3
    queued = await hub.store.list_tasks(parent_room_id="call", statuses=[TaskStatus.QUEUED])
    assert len(queued) == 3

    gate.open.set()
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), GUARD)
    assert [r.status for r in results] == [TaskStatus.OK] * 5
    assert gate.most == 2
    # Queued tasks start in the order they were delegated.
    assert gate.rooms == [f"call::task-{n}" for n in range(1, 6)]


async def test_per_room_limit_is_honoured() -> None:
    hub = Hub(max_tasks_per_room=1)
    gate = Gate()
    await hub.create_room("a")
    await hub.create_room("b")
    worker = calling("w", gate.tool())
    handles = [await hub.delegate(worker, "x", room) for room in ("a", "a", "b", "b")]
    await settle()

    assert gate.running == 2
    assert sorted(gate.rooms) == ["a::task-1", "b::task-1"]
    gate.open.set()
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), GUARD)
    assert all(r.ok for r in results)


async def test_closing_the_parent_room_cancels_its_tasks() -> None:
    hub = Hub()
    gate = Gate()
    await hub.create_room("call")
    await hub.create_room("other")
    running = await hub.delegate(calling("w", gate.tool()), "x", "call")
    elsewhere = await hub.delegate(calling("w", gate.tool()), "x", "other")
    await settle()
    queued_right_away = await hub.delegate(answering("w", "never"), "y", "call")

    async with asyncio.timeout(GUARD):  # no new task: the queued one has not started yet
        await hub.close_room("call")
    assert running.status is TaskStatus.CANCELLED
    assert queued_right_away.status is TaskStatus.CANCELLED
    assert not elsewhere.done()
    assert [h.task_id for h in hub.tasks.live.values()] == ["other::task-1"]
    assert "call::task-1" not in hub.rooms
    gate.open.set()
    assert (await result_of(elsewhere)).ok


async def test_child_room_ids_count_per_parent_and_survive_a_restart() -> None:
    store = MemoryStore()
    hub = Hub(store=store)
    await hub.create_room("a")
    await hub.create_room("b")
    worker = answering("w", "ok")
    ids = [(await hub.delegate(worker, "x", room)).task_id for room in ("a", "a", "b", "a")]
    assert ids == ["a::task-1", "a::task-2", "b::task-1", "a::task-3"]
    await hub.wait_idle()
    await asyncio.wait_for(hub.aclose(), GUARD)

    again = Hub(store=store)
    await again.create_room("a")
    handle = await again.delegate(worker, "x", "a")
    assert handle.task_id == "a::task-4"
    await result_of(handle)


class YieldingStore(MemoryStore):
    """A memory store whose task count really suspends, like a database would."""

    async def count_tasks(self, parent_room_id: str) -> int:
        count = await super().count_tasks(parent_room_id)
        await asyncio.sleep(0)  # the answer is on its way back while others run
        return count


async def test_concurrent_delegations_get_distinct_ids() -> None:
    hub = Hub(store=YieldingStore())
    await hub.create_room("a")
    worker = answering("w", "ok")
    handles = await asyncio.gather(*(hub.delegate(worker, "x", "a") for _ in range(3)))
    assert sorted(h.task_id for h in handles) == ["a::task-1", "a::task-2", "a::task-3"]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), GUARD)
    assert all(r.ok for r in results)


async def test_finished_child_rooms_are_archived() -> None:
    hub = Hub()
    await hub.create_room("call")
    handles = [await hub.delegate(answering("w", "ok"), "x", "call") for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), GUARD)

    assert list(hub.rooms) == ["call"]
    archived = await hub.store.list_rooms(parent_id="call")
    assert sorted(r.id for r in archived) == ["call::task-1", "call::task-2", "call::task-3"]
    assert all(r.status is RoomStatus.CLOSED for r in archived)
    assert archived[0].metadata == {"task_id": "call::task-1", "agent_id": "w"}
    with pytest.raises(RoomNotFoundError):
        hub.room("call::task-1")


async def test_live_handles_are_dropped_after_finishing() -> None:
    hub = Hub()
    gate = Gate()
    await hub.create_room("call")
    handle = await hub.delegate(calling("w", gate.tool()), "x", "call")
    assert hub.tasks.get(handle.task_id) is handle
    assert hub.tasks.of_room("call") == [handle]
    gate.open.set()
    await result_of(handle)
    assert hub.tasks.get(handle.task_id) is None
    assert hub.tasks.live == {}
    assert hub.tasks.of_room("call") == []


async def test_share_channels_attaches_the_parents_channel_to_the_child() -> None:
    hub = Hub()
    room = await hub.create_room("call")
    web = TextChannel("web")
    await room.attach(web)
    seen: list[object] = []

    def look(context: ToolContext) -> str:
        assert context.hub is not None
        child = context.hub.room(context.room_id)
        seen.append(child.channels.get("web"))
        return "looked"

    handle = await hub.delegate(calling("w", Tool(look)), "x", "call", share_channels=["web"])
    assert (await result_of(handle)).ok
    assert seen == [web]
    # The parent's binding is untouched when the child room closes.
    assert room.channels["web"] is web


async def test_sharing_an_unknown_channel_is_a_clear_error() -> None:
    hub = Hub()
    room = await hub.create_room("call")
    await room.attach(TextChannel("web"))
    with pytest.raises(VoicehubError, match=r"cannot share channel 'voice'.*'call'.*it has: web"):
        await hub.delegate(answering("w", "x"), "x", "call", share_channels=["voice"])
    assert hub.tasks.live == {}


async def test_delegating_from_an_unknown_room_is_an_error() -> None:
    hub = Hub()
    with pytest.raises(RoomNotFoundError, match="nowhere"):
        await hub.delegate(answering("w", "x"), "x", "nowhere")


async def test_aclose_cancels_running_tasks() -> None:
    hub = Hub()
    gate = Gate()
    await hub.create_room("call")
    handle = await hub.delegate(calling("w", gate.tool()), "x", "call")
    await settle()
    await asyncio.wait_for(hub.aclose(), GUARD)
    assert handle.status is TaskStatus.CANCELLED


def test_limits_must_be_positive() -> None:
    with pytest.raises(VoicehubError, match="at least 1"):
        Hub(max_concurrent_tasks=0)
