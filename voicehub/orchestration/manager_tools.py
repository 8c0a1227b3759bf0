"""Manager tools: discover agents and workflows, and delegate to the best match.

The manager pattern: a manager agent sees `list_agents` and `list_workflows` results before its
first model call (they are pre-run tools, see `PreRun`), weighs the request against each
entry's description, keywords and when-to-use signals, asks the user with `ask_user` when the
choice is unclear, and calls `delegate`. The manager routes; the delegatee does the work.

`delegate` checks the name first. An unknown name is an error result naming close matches and
the known names, so the model can pick again instead of failing the turn. On a call it runs
`InBackground`: the tool answers at once and the result reaches the caller through the
delivery service. `PreRunLLM` carries pre-run results to a model whose tool loop is not ours.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from voicehub.agents.agent import Agent
from voicehub.agents.llm import LLM, ChatMessage, LLMChunk, ToolChoice, ToolSpec
from voicehub.agents.scripted import render
from voicehub.agents.tools import Tool, ToolContext, ToolResult
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.errors import ToolError
from voicehub.orchestration.directory import Directory, Kind, Workflow
from voicehub.orchestration.runtime import OrchestrationRuntime, orchestration_runtime
from voicehub.orchestration.spoken_results import merge_answers

if TYPE_CHECKING:
    from voicehub.delivery.policy import StrategyLike

PRE_RUN_TOOLS = ("list_agents", "list_workflows")
"""Tools run before the first model call when an agent has them (no arguments, read-only)."""

# The injected message of the current run, per PreRun, per asyncio task (context).
_PRE_RUN_RESULTS: ContextVar[dict[PreRun, ChatMessage]] = ContextVar("pre_run_results")

PRE_RUN_HEADER = "Results of tools already run for you before this turn (no need to call them):"
DEFAULT_BACKGROUND_MESSAGE = "I've handed that on. I'll tell you the result as soon as it's ready."


def list_agents_tool(directory: Directory) -> Tool:
    """`list_agents`: a JSON array of agent summaries."""

    def list_agents() -> str:
        """List the agents you can delegate to: name, description, source, keywords,
        when_to_use and when_not_to_use, as a JSON array."""
        return json.dumps([s.model_dump(mode="json") for s in directory.agent_summaries()])

    return Tool(list_agents)


def list_workflows_tool(directory: Directory) -> Tool:
    """`list_workflows`: a JSON array of workflow summaries."""

    def list_workflows() -> str:
        """List the workflows you can delegate to: name, description, goal, path, ephemeral,
        keywords, when_to_use and when_not_to_use, as a JSON array."""
        return json.dumps([s.model_dump(mode="json") for s in directory.workflow_summaries()])

    return Tool(list_workflows)


@dataclass(frozen=True)
class InBackground:
    """`delegate` in background mode (a voice call): the tool answers at once with
    `message` and the result goes to `hub.deliver` with `delivery_strategy`, the way
    `delegate_workers` does; a workflow's result is its steps' answers, without agent ids
    (a caller should not hear "analyst-a:")."""

    delivery_strategy: StrategyLike | None = None
    message: str = DEFAULT_BACKGROUND_MESSAGE


def delegate_tool(
    directory: Directory,
    *,
    timeout: float | None = None,
    share_channels: Sequence[str] | None = None,
    background: InBackground | None = None,
) -> Tool:
    """`delegate(kind, name, instruction)`: run an agent of the directory in a child room (or a
    workflow's steps, one child room each) and answer with the result; or, with
    `background`, answer at once and deliver the result later."""

    async def delegate(
        kind: Annotated[Kind, "'agent' or 'workflow'"],
        name: Annotated[str, "the exact name from list_agents or list_workflows"],
        instruction: Annotated[str, "the task for an agent, or the goal for a workflow"],
        context: ToolContext,
    ) -> str:
        """Hand a task to an agent, or a goal to a workflow, and get back its result. Look
        the names up with list_agents and list_workflows first."""
        hub = orchestration_runtime(context.hub, "delegate")
        if not instruction.strip():
            raise ToolError(f"instruction is empty: say what the {kind} should accomplish")
        run = _Run(hub, context.room_id, timeout, share_channels)
        # Names are checked before anything runs, in both modes, so the model can pick again.
        found = directory.agent(name) if kind == "agent" else directory.workflow(name)
        if found is None:
            raise ToolError(_unknown(directory, kind, name))
        if background is None:
            if isinstance(found, Agent):
                return await run.agent(_runnable(hub, context.room_id, found), instruction)
            return _workflow_report(found, await run.workflow(found, instruction, directory))
        hub.jobs.start(
            _deliver_later(run, directory, found, instruction, background),
            room_id=context.room_id,
        )
        return json.dumps(
            {"status": "dispatched", "kind": kind, "name": name, "message": background.message}
        )

    return Tool(delegate)


async def _deliver_later(
    run: _Run,
    directory: Directory,
    found: Agent | Workflow,
    instruction: str,
    background: InBackground,
) -> None:
    """Run the delegation, then hand its result (or why there is none) to the delivery
    service."""
    kind = "agent" if isinstance(found, Agent) else "workflow"
    name = found.id if isinstance(found, Agent) else found.name
    try:
        if isinstance(found, Agent):
            text = await run.agent(_runnable(run.hub, run.room_id, found), instruction)
        else:
            outcome = await run.workflow(found, instruction, directory)
            answers = [answer for _, answer in outcome.answers]
            text = merge_answers(answers) or outcome.started  # each finding once
    except ToolError as exc:
        text = f"Sorry, the {kind} {name} could not finish: {exc}"
    await run.hub.deliver(
        run.room_id,
        text,
        background.delivery_strategy,
        metadata={"kind": "delegate", "delegate_kind": kind, "name": name, "task": instruction},
    )


def manager_tools(
    directory: Directory,
    *,
    timeout: float | None = None,
    share_channels: Sequence[str] | None = None,
    background: InBackground | None = None,
) -> list[Tool]:
    """`list_agents`, `list_workflows` and `delegate` over `directory`."""
    return [
        list_agents_tool(directory),
        list_workflows_tool(directory),
        delegate_tool(
            directory, timeout=timeout, share_channels=share_channels, background=background
        ),
    ]


class PreRun:
    """Runs designated tools before a run's first model call and injects their results.

    Use `prepare_step` as `run_agent`'s (or `AgentChannel`'s) `prepare_step`. At step 1 the
    tools run once; their results go into a system message placed after the instructions, and
    the same message is shown at every later step of that run (a prepared message does not
    enter the history, so it must be shown again). The results are kept per asyncio task, so
    one `PreRun` can serve many rooms at once. The tools get `context` (by default an empty
    one: pre-run tools must not need a room).
    """

    def __init__(self, tools: Sequence[Tool], *, context: ToolContext | None = None) -> None:
        self.tools = list(tools)
        self.context = context or ToolContext()

    @classmethod
    def for_agent(
        cls,
        agent: Agent,
        extra_tools: Sequence[Tool] = (),
        *,
        names: Sequence[str] = PRE_RUN_TOOLS,
        context: ToolContext | None = None,
    ) -> PreRun:
        """A PreRun for the designated tools `agent` has (in its tools or `extra_tools`)."""
        chosen = [t for t in (*agent.tools, *extra_tools) if t.name in names]
        return cls(chosen, context=context)

    async def results(self) -> list[ToolResult]:
        """Run the tools now, in order."""
        return [await tool.invoke("{}", self.context) for tool in self.tools]

    async def prepare_step(self, step: int, messages: list[ChatMessage]) -> list[ChatMessage]:
        """`messages` with the pre-run results inserted after the leading system messages."""
        if not self.tools:
            return messages
        current = _PRE_RUN_RESULTS.get({})
        injected = current.get(self)
        if step == 1 or injected is None:
            blocks = [f"{r.name}:\n{r.content}" for r in await self.results()]
            injected = ChatMessage(role="system", content="\n\n".join([PRE_RUN_HEADER, *blocks]))
            # Copy on write: a task started from here sees a snapshot, never our later runs.
            _PRE_RUN_RESULTS.set({**current, self: injected})
        at = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
        return [*messages[:at], injected, *messages[at:]]


class PreRunLLM:
    """An `LLM` that sees `pre_run`'s results before every model call.

    For an agent whose tool loop is not ours to prepare (a voice session's model is driven
    by livekit): wrapping its model carries the pre-run results into text rooms and calls
    alike. Each call runs the tools again, so a long conversation sees current listings.
    """

    def __init__(self, llm: LLM, pre_run: PreRun) -> None:
        self.llm = llm
        self.pre_run = pre_run

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        tool_choice: ToolChoice = "auto",
    ) -> AsyncIterator[LLMChunk]:
        prepared = await self.pre_run.prepare_step(1, list(messages))
        async for chunk in self.llm.stream(prepared, tools, tool_choice=tool_choice):
            yield chunk

    async def aclose(self) -> None:
        """Close the wrapped model's client, if it has one."""
        close = getattr(self.llm, "aclose", None)
        if close is not None:
            await close()


# -- running delegatees --------------------------------------------------------------------------


class _Run:
    """One `delegate` call: where it runs and with which limits."""

    def __init__(
        self,
        hub: OrchestrationRuntime,
        room_id: str,
        timeout: float | None,
        share_channels: Sequence[str] | None,
    ) -> None:
        self.hub = hub
        self.room_id = room_id
        self.timeout = timeout
        self.share_channels = share_channels

    async def agent(self, agent: Agent, task: str) -> str:
        handle = await self.hub.delegate(
            agent, task, self.room_id, share_channels=self.share_channels, timeout=self.timeout
        )
        result = await handle.result()
        if not result.ok:
            # An error result, so the model can try another agent or tell the user.
            raise ToolError(result.describe())
        return result.output

    async def workflow(
        self, workflow: Workflow, instruction: str, directory: Directory
    ) -> _WorkflowOutcome:
        summary = workflow.summary
        started = f"Started workflow {summary.name!r} with goal: {summary.goal}"
        # A record in the room that the workflow started (and for what), for whoever watches
        # the room: a workflow without steps is carried out outside voicehub.
        await self.hub.post(
            self.room_id,
            Event(
                kind=EventKind.TASK,
                text=started,
                source="delegate",
                role="system",
                source_type=ChannelType.SYSTEM,
                metadata={"workflow": summary.name, "goal": summary.goal, "task": instruction},
            ),
        )
        if not workflow.steps:
            return _WorkflowOutcome(f"{started}\nInstruction: {instruction}")
        answers: list[tuple[str, str]] = []
        previous = ""
        for number, step in enumerate(workflow.steps, 1):
            listed = directory.agent(step.agent)
            assert listed is not None  # the directory checked every step's agent
            values = {"instruction": instruction, "goal": summary.goal, "previous": previous}
            try:
                previous = await self.agent(
                    _runnable(self.hub, self.room_id, listed), render(step.task, values)
                )
            except ToolError as exc:
                raise ToolError(
                    f"workflow {summary.name!r} stopped at step {number} ({step.agent}): {exc}"
                ) from None
            answers.append((step.agent, previous))
        return _WorkflowOutcome(started, tuple(answers))


@dataclass(frozen=True)
class _WorkflowOutcome:
    """What a workflow run gave: the start record, and each step's (agent, answer)."""

    started: str
    answers: tuple[tuple[str, str], ...] = ()


def _workflow_report(workflow: Workflow, outcome: _WorkflowOutcome) -> str:
    """The tool's answer in answer mode: the steps' answers, numbered, with their agents."""
    if not outcome.answers:
        return outcome.started
    summary = workflow.summary
    lines = [f"Workflow {summary.name!r} finished (goal: {summary.goal})."]
    lines += [f"{n}. {agent}: {answer}" for n, (agent, answer) in enumerate(outcome.answers, 1)]
    return "\n".join(lines)


def _runnable(hub: OrchestrationRuntime, room_id: str, agent: Agent) -> Agent:
    """A directory built from desk files lists agents without a model; the hub may hold the
    same agent with one (the desk loader registered it)."""
    if agent.llm is None:
        registered = hub.agents_of(room_id).get(agent.id)
        if registered is not None and registered.llm is not None:
            return registered
    return agent


def _unknown(directory: Directory, kind: Kind, name: str) -> str:
    other: Kind = "workflow" if kind == "agent" else "agent"
    exists_as_other = (
        directory.workflow(name) if kind == "agent" else directory.agent(name)
    ) is not None
    if exists_as_other:
        return f"{name!r} is {_a(other)}, not {_a(kind)}: call delegate with kind={other!r}"
    known = directory.agent_names if kind == "agent" else directory.workflow_names
    close = directory.close_matches(kind, name)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (
        f"no {kind} named {name!r}.{hint} Known {kind}s: {', '.join(known) or 'none'}. "
        f"Call delegate again with one of these names (see list_{kind}s)."
    )


def _a(kind: Kind) -> str:
    return f"an {kind}" if kind == "agent" else f"a {kind}"
