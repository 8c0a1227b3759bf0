"""Desks built from `channels/`, run end to end in text rooms on a virtual clock; and the
`search_knowledge` builtin they use."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from voicehub.agents.openai import OpenAIChatLLM
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.channels import TextChannel
from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event, EventKind
from voicehub.core.room import Room
from voicehub.core.store.base import TaskStatus
from voicehub.delivery.injector import AlwaysIdle, TextInjector
from voicehub.delivery.policy import WaitForIdle
from voicehub.desks.desk import Desk, build_desk, load_desks
from voicehub.desks.loading import load_desk_file
from voicehub.errors import ConfigError, ToolError, UnknownAgentError
from voicehub.hub import Hub
from voicehub.tools.knowledge import KnowledgeBase, KnowledgeEntry, search_knowledge_tool, tokens
from voicehub.tools.registry import DeskResources, make_tool
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, FakeToolCall, Reply

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return load_desks(CHANNELS)


@dataclass
class TextCall:
    """A desk's room driven by text, with delivery attached as a text room would have it."""

    hub: Hub
    room: Room
    text: TextChannel
    clock: VirtualClock

    async def say(self, words: str) -> list[str]:
        """Send `words` and return what the desk answered at once."""
        await self.text.send(self.room, words)
        return [event.text for event in self.text.pending(self.room.id)]

    async def deliveries(self, *, after: float) -> list[Event]:
        """Finish background work, let `after` seconds of idle pass, return what was delivered."""
        await self.hub.wait_idle()
        await self.clock.advance(after)
        return [e for e in self.text.pending(self.room.id) if e.kind is EventKind.DELIVERY]


OpenCall = Callable[[Desk], Awaitable[TextCall]]


@pytest.fixture
async def open_call() -> AsyncIterator[OpenCall]:
    hubs: list[Hub] = []

    async def open_(desk: Desk) -> TextCall:
        clock = VirtualClock()
        hub = desk.make_hub(clock=clock)
        hubs.append(hub)
        await hub.start()
        room = await hub.create_room("call-1")
        text = TextChannel("web")
        await room.attach(text)
        await hub.delivery.attach(room.id, TextInjector(hub, room.id), AlwaysIdle(hub.clock))
        return TextCall(hub, room, text, clock)

    yield open_
    for hub in hubs:
        await hub.aclose()


# -- building ------------------------------------------------------------------------------


def test_the_research_desk_builds(desks: dict[str, Desk]) -> None:
    desk = desks["research"]
    assert desk.name == "research" and desk.title == "Research desk"
    assert desk.greeting is not None and desk.greeting.startswith("Hello")
    assert sorted(desk.agents) == ["analyst-a", "analyst-b", "desk"]
    assert all(isinstance(agent.llm, ScriptedLLM) for agent in desk.agents.values())
    assert desk.front_agent.id == "desk"
    assert [t.name for t in desk.extra_tools] == ["delegate_workers", "check_tasks", "cancel_task"]
    assert [t.name for t in desk.front_agent_with_tools().tools] == [
        "search_knowledge",
        "delegate_workers",
        "check_tasks",
        "cancel_task",
    ]
    assert [t.name for t in desk.agents["analyst-a"].tools] == ["search_knowledge"]
    assert desk.supervisor is not None and desk.supervisor.async_delivery
    assert desk.supervisor.delivery_strategy == WaitForIdle(1.0)
    assert desk.delivery_mode == "say"
    assert desk.knowledge is not None and "heat pumps" in desk.knowledge.topics


def test_the_drafting_desk_builds(desks: dict[str, Desk]) -> None:
    desk = desks["drafting"]
    assert [t.name for t in desk.extra_tools] == ["delegate_loop", "check_tasks", "cancel_task"]
    assert desk.loop is not None and desk.loop.strategy == "parallel"
    assert desk.loop.max_iterations == 3
    # Reviewers are kept as the loop runs them: with the verdict tool.
    assert desk.agents["editor"].tool("submit_verdict") is not None
    assert desk.agents["fact-checker"].tool("submit_verdict") is not None


def test_make_hub_uses_the_desk_strategy_and_orchestration(desks: dict[str, Desk]) -> None:
    hub = desks["research"].make_hub()
    assert hub.delivery_strategy == WaitForIdle(1.0)
    assert hub.orchestration is not None
    assert {a.id for a in hub.orchestration.agents()} == {"desk", "analyst-a", "analyst-b"}


def test_supervisor_and_loop_share_check_and_cancel(tmp_path: Path) -> None:
    (tmp_path / "both.toml").write_text(
        'name = "both"\n'
        + "".join(f'[[agents]]\nid = "{name}"\n' for name in ("desk", "w", "writer", "editor"))
        + '[supervisor]\nagent = "desk"\nworkers = ["w"]\n'
        + '[loop]\nproducer = "writer"\nreviewers = ["editor"]\n'
    )
    desk = build_desk(load_desk_file(tmp_path / "both.toml"))
    assert [t.name for t in desk.extra_tools] == [
        "delegate_workers",
        "check_tasks",
        "cancel_task",
        "delegate_loop",
    ]


async def test_an_unset_api_key_variable_names_the_file_and_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The desk still builds (a server keeps serving its other desks); using it says why not.
    from voicehub.agents.llm import complete
    from voicehub.desks.keys import missing_keys

    monkeypatch.delenv("VOICEHUB_TEST_KEY", raising=False)
    path = tmp_path / "cloud.toml"
    path.write_text(
        'name = "cloud"\n[[agents]]\nid = "desk"\n'
        'llm = { provider = "openai", model = "gpt-test", api_key_env = "VOICEHUB_TEST_KEY" }\n'
    )
    desk = build_desk(load_desk_file(path))
    message = f"{path}: agents[0]: llm.api_key_env: environment variable VOICEHUB_TEST_KEY is unset"
    assert missing_keys(desk) == [message]
    with pytest.raises(ConfigError) as caught:
        await complete(desk.agents["desk"].llm, [])
    assert str(caught.value) == message


# -- the research desk in a text room ----------------------------------------------------------


async def test_research_request_is_delegated_and_the_findings_delivered(
    desks: dict[str, Desk], open_call: OpenCall
) -> None:
    call = await open_call(desks["research"])

    answer = await call.say("could you research heat pumps for me please")

    # The acknowledgement said with the tool call comes first; the tool returned at once and
    # the desk's reply is the delegation's short follow-up.
    assert answer == [
        "Sure, I'll have my analysts look into heat pumps.",
        "I'll tell you what they find as soon as they're done.",
    ]
    history = await call.hub.history(call.room.id)
    [tool_call] = [e for e in history if e.kind is EventKind.TOOL_CALL]
    assert tool_call.metadata["tool"] == "delegate_workers"
    assert json.loads(tool_call.text) == {"task": "heat pumps"}

    # Nothing is spoken before the caller has been idle for the 1 s buffer.
    await call.hub.wait_idle()
    assert call.text.pending(call.room.id) == []
    [delivery] = await call.deliveries(after=1.0)

    tasks = await call.hub.store.list_tasks(parent_room_id=call.room.id)
    assert sorted((t.agent_id, t.status) for t in tasks) == [
        ("analyst-a", TaskStatus.OK),
        ("analyst-b", TaskStatus.OK),
    ]
    assert all(t.child_room_id.startswith("call-1::task-") for t in tasks)
    assert delivery.metadata["kind"] == "supervisor"
    assert delivery.metadata["strategy"] == "wait_for_idle"
    assert delivery.text.startswith("Here is what I found. A heat pump moves heat")
    assert "three units of heat" in delivery.text
    # both analysts read the same entry: the caller hears it once, not twice
    assert delivery.text.count("three units of heat") == 1
    assert "I checked our notes as well" not in delivery.text


async def test_status_question_reports_the_tasks(
    desks: dict[str, Desk], open_call: OpenCall
) -> None:
    call = await open_call(desks["research"])
    assert await call.say("how is it going") == [
        "Here is where things stand. No background tasks have been started in this conversation."
    ]
    await call.say("please look into wind turbines")
    await call.deliveries(after=1.0)

    assert await call.say("how is it going?") == [
        "Here is where things stand. 2 finished: analyst-a ok, analyst-b ok."
    ]


async def test_never_mind_cancels_the_research(desks: dict[str, Desk], open_call: OpenCall) -> None:
    call = await open_call(desks["research"])
    await call.say("find out about electric cars")

    assert await call.say("never mind") == ["Okay. Cancelled 2 running tasks."]
    assert await call.deliveries(after=5.0) == []


async def test_quick_questions_greetings_and_fallback(
    desks: dict[str, Desk], open_call: OpenCall
) -> None:
    call = await open_call(desks["research"])
    assert await call.say("hi there") == [
        "Hello! Ask me to research a topic, like solar panels or heat pumps."
    ]
    [answer] = await call.say("what is a smart meter")
    assert answer.startswith("A smart meter sends your energy readings")
    assert await call.say("can you do some research") == ["What should my analysts research?"]
    await call.say("hi")  # the half request is over: the next words stand alone
    assert (await call.say("blue elephants"))[0].startswith("I can have my analysts research")
    assert await call.hub.store.list_tasks(parent_room_id=call.room.id) == []


async def test_the_room_remembers_its_desk(desks: dict[str, Desk], open_call: OpenCall) -> None:
    call = await open_call(desks["research"])
    stored = await call.hub.store.get_room(call.room.id)
    assert stored is not None and stored.metadata["desk"] == "research"


# -- the drafting desk ---------------------------------------------------------------------


async def test_drafting_desk_delivers_the_reviewed_revision(
    desks: dict[str, Desk], open_call: OpenCall
) -> None:
    call = await open_call(desks["drafting"])

    answer = await call.say("please write a short note about electric cars")

    assert answer == [
        "Sure, I'll have a note on electric cars written and reviewed.",
        "I'll read it to you once my editor and fact checker have approved it.",
    ]
    [tool_call] = [e for e in await call.hub.history(call.room.id) if e.kind is EventKind.TOOL_CALL]
    assert tool_call.metadata["tool"] == "delegate_loop"
    assert json.loads(tool_call.text) == {"task": "electric cars"}

    [delivery] = await call.deliveries(after=1.0)

    assert delivery.metadata["kind"] == "loop"
    assert delivery.metadata["approved"] is True
    assert delivery.metadata["iteration"] == 2
    assert delivery.text.startswith("Electric cars run on a battery")  # the note, no marker
    tasks = await call.hub.store.list_tasks(parent_room_id=call.room.id)
    # Two rounds of: the writer, then both reviewers in parallel.
    assert [t.agent_id for t in tasks] == ["writer", "editor", "fact-checker"] * 2
    assert "Reviewer feedback" in tasks[3].input
    assert "lead with the main point" in tasks[3].input


# -- a cloud model behind the same desk file -----------------------------------------------------


async def test_an_openai_front_agent_delegates_to_scripted_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_call: OpenCall
) -> None:
    delegate = FakeToolCall("delegate_workers", ('{"task": "sol', 'ar panels"}'))
    script = [Reply(tool_calls=(delegate,)), Reply(text=("My analysts ", "are on it."))]
    async with FakeOpenAIServer(script) as server:
        monkeypatch.setenv("VOICEHUB_TEST_KEY", server.api_key or "")
        research = (CHANNELS / "research.toml").read_text()
        front = '[[agents]]\nid = "desk"\n'
        llm = f'llm = {{ provider = "openai", model = "gpt-test", base_url = "{server.base_url}", '
        llm += 'api_key_env = "VOICEHUB_TEST_KEY" }\n'
        start, end = research.index(front), research.index('[[agents]]\nid = "analyst-a"')
        cloud = research[:start] + front + llm + 'tools = ["search_knowledge"]\n\n' + research[end:]
        (tmp_path / "knowledge").mkdir()
        (tmp_path / "knowledge" / "research.toml").write_text(
            (CHANNELS / "knowledge" / "research.toml").read_text()
        )
        (tmp_path / "cloud.toml").write_text(cloud.replace('name = "research"', 'name = "cloud"'))
        desk = build_desk(load_desk_file(tmp_path / "cloud.toml"))
        assert isinstance(desk.front_agent.llm, OpenAIChatLLM)
        call = await open_call(desk)

        assert await call.say("research solar panels") == ["My analysts are on it."]
        [delivery] = await call.deliveries(after=1.0)
        await desk.aclose()

    assert "Solar panels turn sunlight into electricity" in delivery.text
    sent_tools = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert sent_tools == {"search_knowledge", "delegate_workers", "check_tasks", "cancel_task"}


# -- search_knowledge ---------------------------------------------------------------------


@pytest.fixture
def knowledge() -> KnowledgeBase:
    return KnowledgeBase.from_file(CHANNELS / "knowledge" / "research.toml")


def test_tokens_drop_common_words_and_fold_plurals() -> None:
    assert tokens("Tell me about the batteries, please!") == ["battery"]
    assert tokens("What's the status of heat pumps?") == ["status", "heat", "pump"]


def test_search_finds_the_best_entry(knowledge: KnowledgeBase) -> None:
    [match] = knowledge.search("heat pumps")
    assert match.entry.topic == "heat pumps"
    assert knowledge.answer("how do electric cars charge").startswith("Electric cars run on")


def test_search_returns_a_close_second(knowledge: KnowledgeBase) -> None:
    found = knowledge.search("solar panels and batteries")
    assert [m.entry.topic for m in found] == ["solar panels", "batteries"]
    assert found[0].score > found[1].score
    answer = knowledge.answer("solar panels and batteries")
    assert "Solar panels turn sunlight" in answer and "Home batteries store" in answer


def test_search_says_clearly_when_nothing_matches(knowledge: KnowledgeBase) -> None:
    assert knowledge.search("the weather tomorrow") == []
    assert knowledge.answer("the weather tomorrow") == (
        "I found nothing on the weather tomorrow in the knowledge base."
    )


def test_search_is_deterministic_and_ties_go_to_the_earlier_entry() -> None:
    base = KnowledgeBase(
        [
            KnowledgeEntry(topic="green tea", text="First."),
            KnowledgeEntry(topic="black tea", text="Second."),
        ]
    )
    assert [m.entry.text for m in base.search("tea")] == ["First.", "Second."]
    assert base.answer("tea") == base.answer("TEA!") == "First. Second."
    # Text words alone do not make a match.
    assert base.search("first") == []


async def test_search_knowledge_tool(knowledge: KnowledgeBase) -> None:
    tool = make_tool("search_knowledge", DeskResources(knowledge=knowledge))
    assert tool.name == "search_knowledge"
    assert tool.spec.parameters["required"] == ["query"]
    assert "heat pumps" in tool.description
    result = await tool.invoke({"query": "wind turbines"})
    assert not result.is_error and result.content.startswith("Wind turbines use the wind")
    empty = await search_knowledge_tool(knowledge).invoke('{"query": "  "}')
    assert empty.is_error and "query is empty" in empty.content
    with pytest.raises(ToolError):
        knowledge.answer("")


def test_registry_errors() -> None:
    with pytest.raises(ConfigError, match="known builtin tools: search_knowledge"):
        make_tool("web_search", DeskResources())
    with pytest.raises(ConfigError, match="needs a knowledge base"):
        make_tool("search_knowledge", DeskResources())


def test_broken_knowledge_files_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "kb.toml"
    path.write_text('[[entries]]\ntopic = "x"\ntext = "y"\nkeyword = ["z"]\n')
    with pytest.raises(ConfigError, match=r"kb.toml: entries\[0\].keyword: unknown field"):
        KnowledgeBase.from_file(path)
    path.write_text("[[entries]\n")
    with pytest.raises(ConfigError, match=r"kb.toml: TOML syntax error: .*line 1"):
        KnowledgeBase.from_file(path)


async def test_two_desks_on_one_hub_keep_their_own_agents(desks: dict[str, Desk]) -> None:
    research, drafting = desks["research"], desks["drafting"]
    # Both example desks name their front agent "desk".
    assert research.front_agent.id == drafting.front_agent.id == "desk"
    async with Hub() as hub:
        await hub.create_room("r", orchestration=research.orchestration())
        await hub.create_room("d", orchestration=drafting.orchestration())
        assert hub.agent("desk", "r") is research.agents["desk"]
        assert hub.agent("desk", "d") is drafting.agents["desk"]
        # A child room sees its root room's agents.
        assert hub.agent("desk", "d::task-1") is drafting.agents["desk"]
        with pytest.raises(UnknownAgentError, match="'analyst-a' in room 'd'"):
            hub.agent("analyst-a", "d")
        handle = await hub.delegate("analyst-a", "heat pumps", "r")
        assert handle.agent_id == "analyst-a"
        await handle.result()
