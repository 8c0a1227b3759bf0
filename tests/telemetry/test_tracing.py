"""Traces with the SDK's in-memory exporter: a dispatch is one trace from the caller's call
through the `delegate_workers` tool call, its workers' tasks (and their own tool calls in
the child rooms) to the delivery attempt that speaks the result, and stays one trace when
the result is finished on one instance (hub) and spoken on another, on one Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.delivery.test_instances import advance_until
from tests.support.waiting import until
from voicehub import Agent, ScriptedLLM, Supervisor, TextChannel
from voicehub.agents.tools import ToolContext, tool
from voicehub.core.clock import VirtualClock
from voicehub.core.store.base import DeliveryStatus
from voicehub.core.store.redis import RedisStore
from voicehub.core.tracing import NO_TRACING, TRACE_KEY
from voicehub.delivery.announcements import follow_announcements
from voicehub.delivery.policy import Immediate
from voicehub.hub import Hub, HubInstance
from voicehub.telemetry.call_spans import CallSpans
from voicehub.telemetry.setup import Tracing, TracingSettings, start_tracing
from voicehub_dev.fakes.redis_server import RedisServer, redis_server, unique_prefix
from voicehub_dev.fakes.scripted_session import FakeSession

__all__ = ["redis_server"]

ROOM = "research:alice"


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


def supervisor() -> Supervisor:
    analyst = Agent(
        id="analyst",
        tools=[lookup],
        llm=ScriptedLLM(
            [
                {
                    "regex": r"(?P<topic>.+)",
                    "tool": "lookup",
                    "arguments": {"topic": "{topic}"},
                    "reply": "Found: {result}",
                }
            ]
        ),
    )
    desk = Agent(
        id="desk",
        llm=ScriptedLLM(
            [
                {
                    "regex": r"research (?P<topic>.+)",
                    "say": "On it.",
                    "tool": "delegate_workers",
                    "arguments": {"task": "{topic}"},
                    "reply": "{result.message}",
                }
            ]
        ),
    )
    return Supervisor(desk, [analyst], strategy="parallel", async_delivery=True)


@dataclass
class Traced:
    hub: Hub
    tracing: Tracing
    exporter: InMemorySpanExporter
    spans: CallSpans

    def finished(self) -> list[ReadableSpan]:
        self.tracing.flush()
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name == name]


def traced(hub: Hub) -> Traced:
    exporter = InMemorySpanExporter()
    tracing = start_tracing(TracingSettings(schedule_delay_millis=60_000), exporter=exporter)
    hub.tracer = tracing.tracer
    return Traced(hub, tracing, exporter, CallSpans(hub, tracing.tracer))


def one(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [span.name for span in spans]
    return spans[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=1000.0)


async def ask(hub: Hub, text: str) -> TextChannel:
    room = await hub.create_room(ROOM, orchestration=supervisor())
    channel = TextChannel()
    await room.attach(channel)
    await channel.send(room, text)
    return channel


async def test_a_dispatch_is_one_trace_from_the_call_to_the_spoken_result(
    clock: VirtualClock,
) -> None:
    async with Hub(clock=clock, delivery_strategy=Immediate()) as hub:
        t = traced(hub)
        t.spans.call_started(ROOM, {"voicehub.desk": "research"})
        caller = FakeSession(clock, speech_seconds=1.0)
        await hub.delivery.attach(ROOM, caller, caller.activity)
        await ask(hub, "research heat pumps")
        await hub.wait_idle()

        async def spoken() -> bool:
            return bool(caller.injections) and caller.injections[0].outcome is not None

        await advance_until(clock, spoken, limit=10)
        await hub.wait_idle()
        t.spans.call_ended(ROOM)

        call = one(t.named("call research"))
        dispatch = one(t.named("tool delegate_workers"))
        task = one(t.named("task analyst"))
        worker_tool = one(t.named("tool lookup"))
        attempt = one(t.named("delivery attempt"))
        assert {trace_id(s) for s in t.finished()} == {trace_id(call)}
        assert parent_id(dispatch) == span_id(call)
        assert parent_id(task) == span_id(dispatch)  # the delegation, with its child room
        assert task.attributes is not None
        assert task.attributes["voicehub.child_room.id"] == f"{ROOM}::task-1"
        assert task.attributes["voicehub.task.status"] == "ok"
        assert parent_id(worker_tool) == span_id(task)  # the worker's tool, in its room
        assert worker_tool.attributes is not None
        assert worker_tool.attributes["voicehub.tool.arguments"] == '{"topic": "heat pumps"}'
        assert worker_tool.attributes["voicehub.room.id"] == f"{ROOM}::task-1"
        assert parent_id(attempt) == span_id(dispatch)  # the result belongs to its dispatch
        assert attempt.attributes is not None
        assert attempt.attributes["voicehub.delivery.outcome"] == "delivered"
        assert attempt.attributes["voicehub.delivery.strategy"] == "immediate"
        assert attempt.attributes["voicehub.delivery.wait_seconds"] >= 0.0  # type: ignore[operator]
        assert [link.context.span_id for link in attempt.links] == [span_id(call)]

        # The store keeps the trace context with the task and the delivery.
        [record] = await hub.store.list_tasks(parent_room_id=ROOM)
        assert record.metadata[TRACE_KEY]["traceparent"].split("-")[2] == f"{span_id(task):016x}"
        [delivery] = await hub.store.list_deliveries(room_id=ROOM)
        stored = delivery.metadata[TRACE_KEY]["traceparent"]
        assert stored.split("-")[1:3] == [f"{trace_id(call):032x}", f"{span_id(dispatch):016x}"]


async def test_a_failed_tool_and_a_held_result_are_marked(clock: VirtualClock) -> None:
    async with Hub(clock=clock, delivery_strategy=Immediate()) as hub:
        t = traced(hub)
        # nobody is on the call: the result is held, and its span says so
        await ask(hub, "research heat pumps")
        await hub.wait_idle()
        held = one(t.named("delivery held"))
        assert held.attributes is not None
        assert held.attributes["voicehub.delivery.outcome"] == "held"
        dispatch = one(t.named("tool delegate_workers"))
        assert trace_id(held) == trace_id(dispatch)

        bad = await lookup.invoke('{"topic": 3}', _context(hub))
        assert bad.is_error
        failed = one(t.named("tool lookup")[-1:])
        assert failed.status.status_code.name == "ERROR"
        assert "bad arguments" in (failed.status.description or "")


def _context(hub: Hub) -> ToolContext:
    return ToolContext(hub=hub, room_id=ROOM, agent_id="desk", call_id="c1")


async def test_tracing_off_makes_no_span_and_stamps_nothing(clock: VirtualClock) -> None:
    async with Hub(clock=clock, delivery_strategy=Immediate()) as hub:
        assert hub.tracer is NO_TRACING
        await ask(hub, "research heat pumps")
        await hub.wait_idle()
        [record] = await hub.store.list_tasks(parent_room_id=ROOM)
        assert TRACE_KEY not in record.metadata
        [delivery] = await hub.store.list_deliveries(room_id=ROOM)
        assert TRACE_KEY not in delivery.metadata


# -- two instances on one Redis ------------------------------------------------------------


@pytest.fixture
async def two_instances(
    redis_server: RedisServer, clock: VirtualClock
) -> AsyncIterator[tuple[Traced, Traced]]:
    prefix = unique_prefix()
    made: list[tuple[Traced, asyncio.Task[None]]] = []
    for name in ("a", "b"):
        store = RedisStore(redis_server.url, prefix=prefix)
        hub = Hub(
            clock=clock,
            store=store,
            delivery_strategy=Immediate(),
            instance=HubInstance(f"instance-{name}", wall=clock.now),
        )
        await hub.start()
        follower = asyncio.create_task(follow_announcements(hub.delivery, store, clock))
        made.append((traced(hub), follower))
    first = made[0][0].hub.store
    assert isinstance(first, RedisStore)

    async def subscribed() -> bool:
        counts = await first.redis.pubsub_numsub(first.channel)
        return bool(counts) and counts[0][1] == 2

    await until(subscribed, poll=0)
    yield made[0][0], made[1][0]
    for instance, follower in made:
        follower.cancel()
        await asyncio.gather(follower, return_exceptions=True)
        await instance.hub.aclose()


async def test_a_result_finished_on_one_instance_and_spoken_on_another_is_one_trace(
    two_instances: tuple[Traced, Traced], clock: VirtualClock
) -> None:
    a, b = two_instances
    # The caller's call is live on B; the workers run on A (the call that dispatched them
    # was on A and dropped; the caller came back through B).
    b.spans.call_started(ROOM, {"voicehub.desk": "research"})
    caller = FakeSession(clock, speech_seconds=1.0)
    await b.hub.delivery.attach(ROOM, caller, caller.activity)
    await ask(a.hub, "research heat pumps")
    await a.hub.wait_idle()

    async def delivered() -> bool:
        [record] = await a.hub.store.list_deliveries(room_id=ROOM)
        return record.status is DeliveryStatus.DELIVERED

    await advance_until(clock, delivered, limit=20)
    await b.hub.wait_idle()
    b.spans.call_ended(ROOM)

    dispatch = one(a.named("tool delegate_workers"))
    task = one(a.named("task analyst"))
    attempt = one(b.named("delivery attempt"))
    call_on_b = one(b.named("call research"))
    assert trace_id(attempt) == trace_id(dispatch) == trace_id(task)
    assert parent_id(attempt) == span_id(dispatch)
    assert attempt.attributes is not None
    assert attempt.attributes["voicehub.delivery.outcome"] == "delivered"
    # B's call is a trace of its own; the attempt links to it
    assert trace_id(call_on_b) != trace_id(dispatch)
    assert [link.context.span_id for link in attempt.links] == [span_id(call_on_b)]
    assert caller.texts and "notes on heat pumps" in caller.texts[0]
