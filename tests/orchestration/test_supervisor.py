"""Supervisor orchestration, driven end to end by scripted LLMs in text rooms."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.room import Room
from voicehub.core.store.base import TaskStatus
from voicehub.delivery.injector import AlwaysIdle, TextInjector
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.base import Orchestration
from voicehub.orchestration.delegation import INTERNAL_REASON
from voicehub.orchestration.supervisor import DEFAULT_DELEGATION_MESSAGE, Supervisor

GUARD = 5.0


def researcher() -> Agent:
    llm = ScriptedLLM([{"match": ["*"], "say": "Research on: {message}"}])
    return Agent(id="researcher", description="Finds facts.", llm=llm)


def writer() -> Agent:
    llm = ScriptedLLM(
        [
            {
                "regex": r"Previous result from researcher:\s*(?P<previous>.+)",
                "say": "Article using [{previous}]",
            },
            {"match": ["*"], "say": "Article about: {message}"},
        ]
    )
    return Agent(id="writer", description="Writes articles.", llm=llm)


def gated_worker(gate: asyncio.Event, agent_id: str = "slowpoke") -> Agent:
    async def dig() -> str:
        """Dig for a long time."""
        await gate.wait()
        return "found the treasure"

    llm = ScriptedLLM([{"match": ["*"], "tool": "dig", "reply": "Dug: {result}"}])
    return Agent(id=agent_id, llm=llm, tools=(Tool(dig),))


def coordinator(**extra_rules: object) -> Agent:
    """A supervisor that delegates "research <topic>" and reads the result back."""
    rules: list[dict[str, object]] = [
        {
            "regex": r"research (?P<topic>.+)",
            "tool": "delegate_workers",
            "arguments": {"task": "{topic}"},
            "reply": "The team says: {result}",
        },
        {
            "regex": r"ask the researcher about (?P<topic>.+)",
            "tool": "delegate_to_researcher",
            "arguments": {"task": "{topic}"},
            "reply": "Researcher: {result}",
        },
        {
            "regex": r"ask the writer about (?P<topic>.+)",
            "tool": "delegate_to_writer",
            "arguments": {"task": "{topic}"},
            "reply": "Writer: {result}",
        },
        {"match": ["how is it going"], "tool": "check_tasks", "reply": "{result}"},
        {"match": ["never mind"], "tool": "cancel_task", "reply": "{result}"},
        {
            "regex": r"cancel task (?P<id>\S+)",
            "tool": "cancel_task",
            "arguments": {"task_id": "{id}"},
            "reply": "{result}",
        },
    ]
    return Agent(id="coordinator", llm=ScriptedLLM(rules, fallback="How can I help?"))


@pytest.fixture
async def hub() -> AsyncIterator[Hub]:
    hub = Hub(clock=VirtualClock())
    yield hub
    await asyncio.wait_for(hub.aclose(), GUARD)


async def text_room(
    hub: Hub, orchestration: Orchestration | None = None
) -> tuple[Room, TextChannel]:
    room = await hub.create_room("call", orchestration=orchestration)
    text = TextChannel("web")
    await room.attach(text)
    return room, text


async def ask(room: Room, text: TextChannel, words: str) -> list[str]:
    await text.send(room, words)
    return [e.text for e in text.pending(room.id)]


# -- tool mode, waiting for results ---------------------------------------------------------


async def test_parallel_strategy_with_delegate_workers(hub: Hub) -> None:
    sup = Supervisor(coordinator(), [researcher(), writer()], strategy="parallel")
    room, text = await text_room(hub, sup)

    assert await ask(room, text, "research ocean tides") == [
        "The team says: Research on: ocean tides\nArticle about: ocean tides"
    ]
    tasks = await hub.store.list_tasks(parent_room_id="call")
    assert sorted((t.agent_id, t.input, t.status) for t in tasks) == [
        ("researcher", "ocean tides", TaskStatus.OK),
        ("writer", "ocean tides", TaskStatus.OK),
    ]
    # Workers ran in child rooms, not in the call.
    assert list(hub.rooms) == ["call"]
    sources = {e.source for e in await hub.history("call")}
    assert sources == {"web", "coordinator"}


async def test_sequential_strategy_passes_the_previous_output_on(hub: Hub) -> None:
    sup = Supervisor(coordinator(), [researcher(), writer()], strategy="sequential")
    room, text = await text_room(hub, sup)

    (reply,) = await ask(room, text, "research ocean tides")
    assert reply == (
        "The team says: Research on: ocean tides\nArticle using [Research on: ocean tides]"
    )
    writer_task = await hub.store.get_task("call::task-2")
    assert writer_task is not None
    assert writer_task.agent_id == "writer"
    assert writer_task.input == (
        "ocean tides\n\nPrevious result from researcher:\nResearch on: ocean tides"
    )


async def test_per_worker_tools_without_a_strategy(hub: Hub) -> None:
    sup = Supervisor(coordinator(), [researcher(), writer()])
    assert [t.name for t in sup.tools()] == ["delegate_to_researcher", "delegate_to_writer"]
    assert sup.tools()[0].spec.description == "Delegate a task to researcher: Finds facts."
    room, text = await text_room(hub, sup)

    assert await ask(room, text, "ask the writer about whales") == ["Writer: Article about: whales"]
    assert await ask(room, text, "ask the researcher about krill") == [
        "Researcher: Research on: krill"
    ]
    # delegate_workers is not offered in this mode, so the scripted rule for it is skipped.
    assert await ask(room, text, "research whales") == ["How can I help?"]
    tasks = await hub.store.list_tasks(parent_room_id="call")
    assert [(t.agent_id, t.input) for t in tasks] == [("writer", "whales"), ("researcher", "krill")]


async def test_a_failed_worker_is_reported_not_raised(hub: Hub) -> None:
    broken = Agent(id="broken")  # no llm: the task fails with a reason
    sup = Supervisor(coordinator(), [researcher(), broken], strategy="parallel")
    room, text = await text_room(hub, sup)
    (reply,) = await ask(room, text, "research tides")
    # The caller hears which part failed, never the exception (written for operators).
    assert reply == f"The team says: Research on: tides\nbroken failed: {INTERNAL_REASON}"


# -- framework-driven mode ------------------------------------------------------------------


def presenting_coordinator() -> Agent:
    llm = ScriptedLLM(
        [
            {"on": "instruction", "match": ["core topic"], "say": "ocean tides"},
            {
                "on": "instruction",
                "regex": r"Results:\s*(?P<results>.+)",
                "say": "Here is what we found. {results}",
            },
            {"match": ["*"], "say": "should not answer directly"},
        ]
    )
    return Agent(id="coordinator", llm=llm)


async def test_auto_delegate_with_refine_task(hub: Hub) -> None:
    sup = Supervisor(
        presenting_coordinator(),
        [researcher(), writer()],
        strategy="sequential",
        auto_delegate=True,
    )
    room, text = await text_room(hub, sup)
    assert sup.tools()  # tools exist, but the framework-driven agent does not get them
    channel = room.channels["coordinator"]
    assert isinstance(channel, AgentChannel)
    assert channel.extra_tools == []

    (reply,) = await ask(room, text, "Could you tell me how the tides in the ocean work?")
    # Pass 1 extracted the topic; the workers got the topic, not the whole sentence.
    tasks = await hub.store.list_tasks(parent_room_id="call")
    assert [t.input.split("\n")[0] for t in tasks] == ["ocean tides", "ocean tides"]
    # Pass 2 presented the combined results.
    assert reply == (
        "Here is what we found. Research on: ocean tides\nArticle using [Research on: ocean tides]"
    )
    # Only the user's message and the presentation are in the room; pass 1 is not spoken.
    assert [(e.source, e.kind) for e in await hub.history("call")] == [
        ("web", EventKind.MESSAGE),
        ("coordinator", EventKind.MESSAGE),
    ]


async def test_auto_delegate_without_refine(hub: Hub) -> None:
    sup = Supervisor(
        presenting_coordinator(),
        [researcher()],
        auto_delegate=True,
        refine_task=False,
    )
    room, text = await text_room(hub, sup)
    (reply,) = await ask(room, text, "tides please")
    assert reply == "Here is what we found. Research on: tides please"
    (task,) = await hub.store.list_tasks(parent_room_id="call")
    assert task.input == "tides please"


# -- background modes -----------------------------------------------------------------------


async def attach_delivery(hub: Hub, room: Room) -> None:
    await hub.delivery.attach(room.id, TextInjector(hub, room.id), AlwaysIdle(hub.clock))


async def finish_background(hub: Hub) -> None:
    """Let background jobs end, then pass the default WaitForIdle buffer (1 s)."""
    await asyncio.wait_for(hub.wait_idle(), GUARD)
    assert isinstance(hub.clock, VirtualClock)
    await hub.clock.advance(1.0)


async def test_async_delivery_returns_at_once_and_delivers_later(hub: Hub) -> None:
    gate = asyncio.Event()
    agent = coordinator()
    rules = [
        {
            "regex": r"research (?P<topic>.+)",
            "tool": "delegate_workers",
            "arguments": {"task": "{topic}"},
            "reply": "{result.message} ({result.status}: {result.task_ids})",
        }
    ]
    agent = agent.model_copy(update={"llm": ScriptedLLM(rules)})
    sup = Supervisor(agent, [researcher(), gated_worker(gate)], async_delivery=True)
    assert sup.strategy is None  # async_delivery alone gives delegate_workers (parallel)
    room, text = await text_room(hub, sup)
    await attach_delivery(hub, room)

    (reply,) = await ask(room, text, "research tides")
    assert reply == (f'{DEFAULT_DELEGATION_MESSAGE} (dispatched: ["call::task-1", "call::task-2"])')
    await settle()
    assert [h.agent_id for h in hub.tasks.of_room("call")] == ["slowpoke"]

    gate.set()
    await finish_background(hub)
    (delivered,) = text.pending(room.id)
    assert delivered.kind is EventKind.DELIVERY
    assert delivered.text == ("Research on: tides\nDug: found the treasure")
    assert delivered.metadata["kind"] == "supervisor"
    assert delivered.metadata["task"] == "tides"
    assert delivered.metadata["task_ids"] == ["call::task-1", "call::task-2"]
    assert delivered.metadata["statuses"] == ["ok", "ok"]


async def test_async_delivery_sequential_hands_output_on(hub: Hub) -> None:
    sup = Supervisor(
        coordinator(),
        [researcher(), writer()],
        strategy="sequential",
        async_delivery=True,
        delegation_message="On it.",
    )
    room, text = await text_room(hub, sup)
    await attach_delivery(hub, room)

    (reply,) = await ask(room, text, "research tides")
    result = json.loads(reply.removeprefix("The team says: "))
    assert result == {
        "status": "dispatched",
        "task_ids": ["call::task-1"],  # a sequence starts with its first worker
        "workers": ["researcher", "writer"],
        "message": "On it.",
    }
    await finish_background(hub)
    (delivered,) = text.pending(room.id)
    assert delivered.text == ("Research on: tides\nArticle using [Research on: tides]")


async def test_wait_for_result_false_dispatches_and_delivers(hub: Hub) -> None:
    sup = Supervisor(coordinator(), [researcher(), writer()], wait_for_result=False)
    assert [t.name for t in sup.tools()] == [
        "delegate_to_researcher",
        "delegate_to_writer",
        "check_tasks",
        "cancel_task",
    ]
    room, text = await text_room(hub, sup)
    await attach_delivery(hub, room)

    (reply,) = await ask(room, text, "ask the writer about whales")
    assert json.loads(reply.removeprefix("Writer: "))["status"] == "dispatched"
    await finish_background(hub)
    (delivered,) = text.pending(room.id)
    assert (delivered.kind, delivered.text) == (EventKind.DELIVERY, "Article about: whales")


async def test_results_wait_in_the_outbox_until_a_session_attaches(hub: Hub) -> None:
    sup = Supervisor(coordinator(), [researcher()], async_delivery=True)
    room, text = await text_room(hub, sup)
    await ask(room, text, "research tides")
    await finish_background(hub)
    assert text.pending(room.id) == []
    assert [d.content for d in hub.delivery.pending(room.id)] == ["Research on: tides"]

    await attach_delivery(hub, room)
    assert isinstance(hub.clock, VirtualClock)
    await hub.clock.advance(1.0)
    assert [e.text for e in text.pending(room.id)] == ["Research on: tides"]


async def test_check_tasks_and_cancel_task(hub: Hub) -> None:
    gate = asyncio.Event()
    sup = Supervisor(coordinator(), [gated_worker(gate)], async_delivery=True)
    room, text = await text_room(hub, sup)
    await attach_delivery(hub, room)

    assert await ask(room, text, "how is it going?") == [
        "No background tasks have been started in this conversation."
    ]
    await ask(room, text, "research gold")
    await settle()
    assert await ask(room, text, "how is it going?") == ["1 still working: slowpoke (running)."]
    assert await ask(room, text, "cancel task call::task-9") == [
        "error in tool cancel_task: no running task 'call::task-9' here; "
        "running tasks: call::task-1"
    ]
    assert await ask(room, text, "never mind") == ["Cancelled 1 running task."]
    assert hub.tasks.live == {}
    assert await ask(room, text, "how is it going?") == ["1 finished: slowpoke cancelled."]
    assert await ask(room, text, "never mind") == ["There was nothing running to cancel."]
    await finish_background(hub)
    assert text.pending(room.id) == []  # the cancelled job delivers nothing


async def test_cancel_one_task_by_id(hub: Hub) -> None:
    gate = asyncio.Event()
    sup = Supervisor(coordinator(), [gated_worker(gate), researcher()], async_delivery=True)
    room, text = await text_room(hub, sup)
    await attach_delivery(hub, room)
    await ask(room, text, "research gold")
    await settle()
    assert await ask(room, text, "cancel task call::task-1") == ["Cancelled slowpoke."]
    await finish_background(hub)
    (delivered,) = text.pending(room.id)
    assert delivered.metadata["statuses"] == ["cancelled", "ok"]


# -- where the orchestration comes from -----------------------------------------------------


async def test_hub_default_per_room_override_and_none() -> None:
    default = Supervisor(coordinator(), [researcher()], strategy="parallel")
    other_agent = Agent(id="concierge", llm=ScriptedLLM([{"match": ["*"], "say": "Concierge."}]))
    override = Supervisor(other_agent, [writer()], strategy="parallel")
    hub = Hub(orchestration=default)

    first = await hub.create_room("first")
    second = await hub.create_room("second", orchestration=override)
    bare = await hub.create_room("bare", orchestration=None)

    assert hub.orchestration_of("first") is default
    assert hub.orchestration_of("second") is override
    assert hub.orchestration_of("bare") is None
    assert list(first.channels) == ["coordinator"]
    assert list(second.channels) == ["concierge"]
    assert bare.channels == {}
    # Each room reaches its own orchestration's agents, not the other's.
    assert set(hub.agents_of("first")) == {"coordinator", "researcher"}
    assert set(hub.agents_of("second")) == {"concierge", "writer"}
    assert hub.agents_of("bare") == {}

    text = TextChannel("web")
    for room in (first, second, bare):
        await room.attach(text)
        await text.send(room, "research tides")
    assert [e.text for e in text.pending("first")] == ["The team says: Research on: tides"]
    assert [e.text for e in text.pending("second")] == ["Concierge."]
    assert text.pending("bare") == []
    await hub.close_room("first")
    assert hub.orchestration_of("first") is None
    await asyncio.wait_for(hub.aclose(), GUARD)


class Greeter(Orchestration):
    """A custom strategy: one greeting agent, and a hook tagging the room's events."""

    def __init__(self) -> None:
        llm = ScriptedLLM([{"match": ["*"], "say": "Welcome to the desk."}])
        self.greeter = Agent(id="greeter", llm=llm)
        self.installed: list[str] = []

    def agents(self) -> list[Agent]:
        return [self.greeter]

    async def install(self, hub: Hub, room_id: str) -> None:
        self.installed.append(room_id)
        await hub.room(room_id).attach(AgentChannel(self.greeter))

        async def tag(event: Event, ctx: HookContext) -> Event:
            return event.with_metadata(desk="greeter")

        hub.hook(HookTrigger.BEFORE_BROADCAST, room_id=room_id)(tag)


async def test_a_custom_orchestration(hub: Hub) -> None:
    strategy = Greeter()
    room, text = await text_room(hub, strategy)
    assert strategy.installed == ["call"]
    assert hub.agent("greeter", room.id) is strategy.greeter
    await text.send(room, "hello")
    assert [e.text for e in text.pending(room.id)] == ["Welcome to the desk."]
    events = await hub.history("call")
    assert [(e.text, e.metadata.get("desk")) for e in events] == [
        ("hello", "greeter"),
        ("Welcome to the desk.", "greeter"),
    ]
    # Rooms created without it are untouched.
    other = await hub.create_room("plain")
    await other.attach(text)
    await text.send(other, "hello")
    assert text.pending("plain") == []


# -- configuration --------------------------------------------------------------------------


def test_supervisor_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="at least one worker"):
        Supervisor(coordinator(), [])
    with pytest.raises(ConfigError, match="strategy must be"):
        Supervisor(coordinator(), [researcher()], strategy="round-robin")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unique"):
        Supervisor(coordinator(), [researcher(), researcher()])
    with pytest.raises(ConfigError, match="unique"):
        Supervisor(researcher(), [researcher()])
