"""ConversationPipeline (the validated graph) and the Pipeline strategy, end to end through a
TextChannel."""

from __future__ import annotations

import json
from typing import Any

import pytest

from voicehub.agents.agent import Agent
from voicehub.agents.channel import AgentChannel
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.events import Event, EventKind
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.room import Room
from voicehub.errors import ConfigError
from voicehub.hub import Hub
from voicehub.orchestration.handoff import HANDOFF_TOOL
from voicehub.orchestration.pipeline import (
    ConversationPipeline,
    Pipeline,
    PipelineStage,
    handoff_handler_of,
)
from voicehub.orchestration.state import (
    HUMAN,
    ConversationState,
    get_conversation_state,
    set_conversation_state,
)


def handoff_rule(phrase: str, target: str, reply: str, **arguments: Any) -> dict[str, Any]:
    return {
        "match": [phrase],
        "tool": HANDOFF_TOOL,
        "arguments": {"target": target, "reason": f"user said {phrase}", "summary": "{message}"}
        | arguments,
        "reply": reply,
    }


def triage() -> Agent:
    rules = [
        handoff_rule("invoice", "handler", "Let me pass you to our specialist."),
        handoff_rule("close my case", "handler", "{result}", next_phase="resolution"),
    ]
    return Agent(id="triage", llm=ScriptedLLM(rules, fallback="What is the problem?"))


def handler() -> Agent:
    rules = [
        {"match": ["charged twice"], "say": "I've refunded the duplicate charge."},
        handoff_rule("back to triage", "triage", "{result}", next_phase="intake"),
        handoff_rule("thanks", "resolver", "Passing you on to close this out."),
        {"on": "instruction", "match": ["*"], "say": "Hi, I'm the specialist. What happened?"},
    ]
    return Agent(id="handler", llm=ScriptedLLM(rules, fallback="Tell me more."))


def resolver() -> Agent:
    rules = [{"match": ["bye"], "say": "Glad we could help. Goodbye!"}]
    return Agent(id="resolver", llm=ScriptedLLM(rules, fallback="Anything else?"))


def stage(phase: str, agent_id: str, next: str | None = None, *back: str) -> PipelineStage:
    return PipelineStage(phase=phase, agent_id=agent_id, next=next, can_return_to=frozenset(back))


async def chat(room: Room, text: TextChannel, message: str) -> list[tuple[str, str]]:
    await text.send(room, message)
    return [(e.source, e.text) for e in text.pending(room.id)]


# -- the graph ---------------------------------------------------------------------------


def test_an_empty_pipeline_is_rejected() -> None:
    with pytest.raises(ConfigError, match="at least one stage"):
        ConversationPipeline([])


def test_a_repeated_phase_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"stages 0 and 1 both use phase 'coding'"):
        ConversationPipeline([stage("coding", "a"), stage("coding", "b")])


def test_next_must_name_a_phase() -> None:
    with pytest.raises(
        ConfigError, match=r"stage 0 \('coding', agent 'a'\): next='reveiw' is not a phase"
    ):
        ConversationPipeline([stage("coding", "a", "reveiw"), stage("review", "b")])


def test_can_return_to_must_name_a_phase() -> None:
    with pytest.raises(ConfigError, match=r"can_return_to names 'codign'.*phases: coding, review"):
        ConversationPipeline([stage("coding", "a", "review"), stage("review", "b", None, "codign")])


def test_the_supervisor_cannot_run_a_stage() -> None:
    with pytest.raises(ConfigError, match="supervisor 'boss'"):
        ConversationPipeline([stage("intake", "boss")], supervisor_id="boss")


def test_graph_utilities() -> None:
    pipeline = ConversationPipeline(
        [
            stage("analysis", "discuss", "coding"),
            stage("coding", "coder", "review"),
            stage("review", "reviewer", "report", "coding"),
            stage("report", "writer"),
            stage("polish", "writer", "polish"),  # self-reference is a loop, allowed
        ],
        supervisor_id="boss",
    )
    assert pipeline.get_phase_map() == {
        "discuss": "analysis",
        "coder": "coding",
        "reviewer": "review",
        "writer": "report",
    }
    assert pipeline.get_allowed_transitions() == {
        "analysis": {"coding"},
        "coding": {"review"},
        "review": {"report", "coding"},
        "report": set(),
        "polish": {"polish"},
    }
    assert pipeline.targets_for("reviewer") == ["coder", "writer"]
    assert pipeline.targets_for("writer") == []
    router = pipeline.to_router()
    assert [(r.agent_id, set(r.conditions.phases)) for r in router.rules][:2] == [
        ("discuss", {"analysis"}),
        ("coder", {"coding"}),
    ]
    assert router.default_agent_id == "discuss" and router.supervisor_id == "boss"
    assert pipeline.initial_state() == ConversationState(
        phase="analysis", active_agent_id="discuss"
    )


async def test_install_wires_a_review_loop_on_existing_channels() -> None:
    coder = Agent(id="coder", llm=ScriptedLLM([handoff_rule("done", "reviewer", "Sent.")]))
    reviewer = Agent(id="reviewer", llm=ScriptedLLM([handoff_rule("bug", "coder", "Back to you.")]))
    pipeline = ConversationPipeline(
        [stage("coding", "coder", "review"), stage("review", "reviewer", None, "coding")]
    )
    hub = Hub()
    room = await hub.create_room("review")
    channels = [AgentChannel(coder), AgentChannel(reviewer)]
    for channel in channels:
        await room.attach(channel)
    text = TextChannel()
    await room.attach(text)
    router, handoffs = pipeline.install(hub, channels, room_id=room.id)
    await set_conversation_state(room, pipeline.initial_state())

    assert router.default_agent_id == "coder"
    assert await chat(room, text, "done") == [("coder", "Sent.")]
    assert await chat(room, text, "found a bug") == [("reviewer", "Back to you.")]
    state = get_conversation_state(room)
    assert (state.phase, state.active_agent_id) == ("coding", "coder")
    assert [(t.from_phase, t.to_phase) for t in state.phase_history] == [
        ("coding", "review"),
        ("review", "coding"),
    ]
    graph = handoffs.allowed_transitions or {}
    assert {phase: set(nexts) for phase, nexts in graph.items()} == {
        "coding": {"review"},
        "review": {"coding"},
    }


# -- the Pipeline strategy ---------------------------------------------------------------


def test_pipeline_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="Pipeline needs at least one agent"):
        Pipeline([])
    with pytest.raises(ConfigError, match=r"repeated: \['triage'\]"):
        Pipeline([triage(), triage()])
    with pytest.raises(ConfigError, match="2 phases for 3 agents"):
        Pipeline([triage(), handler(), resolver()], phases=["intake", "handling"])


async def test_triage_handler_resolver_end_to_end() -> None:
    strategy = Pipeline(
        [triage(), handler(), resolver()], phases=["intake", "handling", "resolution"]
    )
    hub = Hub(orchestration=strategy)
    fired: list[str] = []

    async def record(event: Event, context: HookContext) -> None:
        fired.append(f"{context.trigger.value}:{event.metadata['handoff']['to_agent']}")

    hub.hooks.add(HookTrigger.ON_HANDOFF, record)
    hub.hooks.add(HookTrigger.ON_PHASE_TRANSITION, record)
    room = await hub.create_room("call")
    text = TextChannel("web")
    await room.attach(text)

    state = get_conversation_state(room)
    assert (state.phase, state.active_agent_id) == ("intake", "triage")
    tools = {
        cid: [t.name for t in ch.extra_tools]
        for cid, ch in room.channels.items()
        if isinstance(ch, AgentChannel)
    }
    assert tools == {"triage": [HANDOFF_TOOL], "handler": [HANDOFF_TOOL], "resolver": []}
    [handler_tool] = room.channels["handler"].extra_tools  # type: ignore[attr-defined]
    assert handler_tool.spec.parameters["properties"]["target"]["enum"] == ["resolver"]

    assert await chat(room, text, "hi") == [("triage", "What is the problem?")]
    assert await chat(room, text, "my invoice is wrong") == [
        ("triage", "Let me pass you to our specialist.")
    ]
    assert await chat(room, text, "I was charged twice") == [
        ("handler", "I've refunded the duplicate charge.")
    ]
    # Pipelines only go forward: the handler cannot send the caller back to triage.
    [(source, refusal)] = await chat(room, text, "back to triage please")
    assert source == "handler"
    assert "handoff rejected: unknown or unreachable target 'triage'" in refusal
    assert "Valid targets: resolver." in refusal
    assert await chat(room, text, "thanks") == [("handler", "Passing you on to close this out.")]
    assert await chat(room, text, "bye") == [("resolver", "Glad we could help. Goodbye!")]

    state = get_conversation_state(room)
    assert state.phase == "resolution" and state.handoff_count == 2
    assert [(t.from_agent, t.to_agent) for t in state.phase_history] == [
        ("triage", "handler"),
        ("handler", "resolver"),
    ]
    assert fired == [
        "on_handoff:handler",
        "on_phase_transition:handler",
        "on_handoff:resolver",
        "on_phase_transition:resolver",
    ]
    rejected = [
        json.loads(e.text)
        for e in await hub.history(room.id)
        if e.kind is EventKind.TOOL_CALL and e.source == "handler"
    ]
    assert rejected[0]["target"] == "triage"


async def test_a_phase_outside_the_graph_is_rejected() -> None:
    room, text = await pipeline_room(
        Pipeline([triage(), handler(), resolver()], phases=["intake", "handling", "resolution"])
    )
    # Triage may reach the handler, but only in the handler's phase, not straight to the end.
    [(_, refusal)] = await chat(room, text, "close my case now")
    assert refusal == (
        "error in tool handoff_conversation: handoff rejected: phase 'intake' cannot move to "
        "'resolution' (allowed next phases: handling). Valid targets: handler."
    )
    state = get_conversation_state(room)
    assert (state.phase, state.active_agent_id) == ("intake", "triage")


async def pipeline_room(strategy: Pipeline, room_id: str = "call") -> tuple[Room, TextChannel]:
    hub = Hub()
    room = await hub.create_room(room_id, orchestration=strategy)
    text = TextChannel("web")
    await room.attach(text)
    return room, text


async def test_the_new_agent_greets_when_asked_to() -> None:
    strategy = Pipeline([triage(), handler()], greeting="You just took over; greet the caller.")
    room, text = await pipeline_room(strategy)

    assert await chat(room, text, "my invoice is wrong") == [
        ("triage", "Let me pass you to our specialist."),
        ("handler", "Hi, I'm the specialist. What happened?"),
    ]


async def test_the_supervisor_sees_every_message() -> None:
    boss = Agent(id="boss", llm=ScriptedLLM([{"match": ["*"], "say": "noted"}]))
    room, text = await pipeline_room(Pipeline([triage(), handler()], supervisor=boss))

    assert sorted(await chat(room, text, "hello")) == [
        ("boss", "noted"),
        ("triage", "What is the problem?"),
    ]
    await chat(room, text, "invoice")
    replies = await chat(room, text, "charged twice")
    assert sorted(replies) == [
        ("boss", "noted"),
        ("handler", "I've refunded the duplicate charge."),
    ]
    assert HANDOFF_TOOL not in [t.name for t in room.channels["boss"].extra_tools]  # type: ignore[attr-defined]


async def test_human_escalation_in_a_pipeline() -> None:
    desk = Agent(id="desk", llm=ScriptedLLM([handoff_rule("person", HUMAN, "Connecting you.")]))
    room, text = await pipeline_room(Pipeline([desk, resolver()], allow_human=True))

    assert await chat(room, text, "a person please") == [("desk", "Connecting you.")]
    assert get_conversation_state(room).awaiting_human
    assert await chat(room, text, "hello?") == []

    handoffs = handoff_handler_of(room.hub, room.id)
    assert handoffs is not None
    await handoffs.handle(room.id, HUMAN, "resolver", "operator finished", "Refund approved")
    assert await chat(room, text, "bye") == [("resolver", "Glad we could help. Goodbye!")]


async def test_per_room_orchestration_and_rooms_without_one() -> None:
    strategy = Pipeline([triage(), handler()])
    hub = Hub()
    with_pipeline = await hub.create_room("a", orchestration=strategy)
    plain = await hub.create_room("b")
    assert hub.orchestration_of("a") is strategy and hub.orchestration_of("b") is None
    assert set(with_pipeline.channels) == {"triage", "handler"}
    assert plain.channels == {}
    assert handoff_handler_of(hub, "b") is None
    # One handler per hub serves every room of the strategy.
    await hub.create_room("c", orchestration=strategy)
    assert handoff_handler_of(hub, "a") is handoff_handler_of(hub, "c")


async def test_a_reopened_room_resumes_with_the_same_agent() -> None:
    strategy = Pipeline([triage(), handler(), resolver()])
    hub = Hub(orchestration=strategy)
    room = await hub.create_room("call")
    text = TextChannel("web")
    await room.attach(text)
    await chat(room, text, "my invoice is wrong")
    await hub.close_room("call")

    room = await hub.create_room("call")  # the caller reconnects
    await room.attach(text)
    assert get_conversation_state(room).active_agent_id == "handler"
    assert await chat(room, text, "I was charged twice") == [
        ("handler", "I've refunded the duplicate charge.")
    ]
