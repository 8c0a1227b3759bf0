"""Checks across tables for `[manager]`, `[blackboard]` and `kind = "plan_and_execute"`
agents: who may hold which role. Run once every agent reference resolves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import ValidationError

from voicehub.orchestration.planner import THOUGHT_TOOL, Thought

if TYPE_CHECKING:
    from voicehub.desks.config import DeskConfig


def coordination_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    """(path, message) for each role an agent cannot hold, first found first."""
    talking = desk.conversation_agent_ids
    on_call = ", ".join(talking)
    manager = desk.manager
    if manager is not None:
        holder = desk.manager_agent_id
        if holder not in talking:
            yield (
                "manager.agent",
                f"{holder!r} never talks with the caller, so it cannot route their requests "
                f"(agents on the call: {on_call})",
            )
        for j, agent_id in enumerate(manager.agents or ()):
            if agent_id == holder:
                yield f"manager.agents[{j}]", f"{agent_id!r} is the manager; it cannot list itself"
        for j, name in enumerate(manager.desks):
            if name == desk.name:
                yield f"manager.desks[{j}]", "this desk's own agents are listed by manager.agents"
    board = desk.blackboard
    if board is not None:
        holder = desk.blackboard_agent_id
        if holder not in talking:
            yield (
                "blackboard.agent",
                f"{holder!r} never talks with the caller, so it cannot start reports "
                f"(agents on the call: {on_call})",
            )
        if board.orchestrator in talking:
            yield (
                "blackboard.orchestrator",
                f"{board.orchestrator!r} talks with the caller; the orchestrator works in the "
                "background: give it an agent of its own",
            )
        seen = {board.orchestrator: "orchestrator"}
        for role, agent_id in board.specialists.items():
            if agent_id in seen:
                yield (
                    f"blackboard.{role}",
                    f"{agent_id!r} is already the {seen[agent_id]}: each role needs its own agent",
                )
            seen.setdefault(agent_id, role)
    yield from _worker_kind_problems(desk)
    yield from _plan_problems(desk)


def _worker_kind_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    """A plan-and-execute agent only works on tasks: it never talks with the caller, reviews,
    or orchestrates a board (its model answers through its planning tools only)."""
    workers = {a.id for a in desk.agents if a.kind == "plan_and_execute"}
    roles = [("agents", agent_id) for agent_id in desk.conversation_agent_ids]
    if desk.loop is not None:
        roles += [(f"loop.reviewers[{j}]", r) for j, r in enumerate(desk.loop.reviewers)]
    if desk.blackboard is not None:
        roles.append(("blackboard.orchestrator", desk.blackboard.orchestrator))
    for path, agent_id in roles:
        if agent_id in workers:
            index = next(i for i, a in enumerate(desk.agents) if a.id == agent_id)
            where = f"agents[{index}].kind" if path.startswith("agents") else path
            yield (
                where,
                f"{agent_id!r} is kind 'plan_and_execute', a worker that plans and runs tool "
                f"calls on a task; it cannot be {_role(path)}: use kind 'agent'",
            )


def _role(path: str) -> str:
    if path.startswith("loop.reviewers"):
        return "a reviewer (it could not submit a verdict)"
    if path.startswith("blackboard"):
        return "the blackboard's orchestrator"
    return "an agent that talks with the caller"


def _plan_problems(desk: DeskConfig) -> Iterator[tuple[str, str]]:
    """A scripted plan must be a valid `Thought` whose steps call the agent's own tools (a
    typo would only show as a failed step on a call)."""
    for i, agent in enumerate(desk.agents):
        if agent.kind != "plan_and_execute" or agent.scripted is None:
            continue
        for j, rule in enumerate(agent.scripted.rules):
            if rule.tool != THOUGHT_TOOL:
                continue
            where = f"agents[{i}].scripted.rules[{j}].arguments"
            try:
                thought = Thought.model_validate(rule.arguments)
            except ValidationError as exc:
                first = exc.errors()[0]
                field = "".join(
                    f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
                )
                yield f"{where}{field}", f"not a valid plan: {first['msg']}"
                continue
            for k, step in enumerate(thought.plan):
                if step.tool_name not in agent.tools:
                    has = ", ".join(agent.tools) or "no tools"
                    yield (
                        f"{where}.plan[{k}].tool_name",
                        f"{agent.id!r} cannot plan with {step.tool_name!r} (its tools: {has})",
                    )
