"""Plan and execute: think up a plan of tool calls, run it step by step, check each result.

1. The model submits a `Thought` (reasoning, a plan of `PlanStep`s, a self-critique, and
   whether to execute or ask for clarification) through the `submit_thought` tool.
2. Each step's tool runs; the model then submits an `AnalysisResult` through
   `submit_analysis`: continue the plan, revise it, or go to the final answer.
3. A revision is a new `Thought` made from the history so far; after `max_revisions` the run
   stops instead of revising again.
4. The model writes the final answer from the execution history.

Structured output goes through forced tool calls, so any tool-calling model works, the
scripted one included. `PlanAndExecute.as_agent` wraps the loop as a worker agent, so a
Supervisor (or `hub.delegate`) gets the final answer back as the task's output.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from voicehub.agents.agent import Agent
from voicehub.agents.llm import LLM, ChatMessage, ToolSpec, complete
from voicehub.agents.scripted import ScriptedLLM
from voicehub.agents.tools import Tool, ToolContext, ToolResult
from voicehub.errors import ConfigError

THOUGHT_TOOL = "submit_thought"
ANALYSIS_TOOL = "submit_analysis"

_Model = TypeVar("_Model", bound=BaseModel)


class PlanStep(BaseModel):
    """One tool call of a plan."""

    tool_name: str = Field(description="the exact name of the tool to call")
    parameters: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")
    description: str | None = Field(default=None, description="what this step achieves")


class Thought(BaseModel):
    """The model's plan for a task, with its reasoning and a critique of the plan."""

    reasoning: str = Field(description="how you understand the task and your strategy")
    plan: list[PlanStep] = Field(description="the tool calls to make, in order")
    criticism: str = Field(description="weak points or ambiguities of this plan")
    action: Literal["execute_plan", "request_clarification"] = "execute_plan"
    clarification_needed: str | None = Field(
        default=None, description="the question to ask when action is request_clarification"
    )


class AnalysisResult(BaseModel):
    """The model's verdict on the last step's result."""

    evaluation: str = Field(description="what the last result means for the task")
    next_action: Literal["continue_plan", "revise_plan", "final_answer"]
    reasoning: str | None = None


class ExecutionResult(BaseModel):
    """How a plan-and-execute run ended."""

    success: bool
    final_result: Any
    execution_history: list[dict[str, Any]] = Field(default_factory=list)
    total_steps: int
    revisions: int = 0


PLAN_PROMPT = (
    "Make a plan for the task: an ordered list of steps, each one call of a tool listed above "
    "(tool_name and parameters). Then criticise the plan. Call submit_thought with reasoning, "
    "plan, criticism and action (execute_plan, or request_clarification with "
    "clarification_needed)."
)
ANALYSIS_PROMPT = (
    "Evaluate the result of the step and call submit_analysis with evaluation, next_action "
    "(continue_plan, revise_plan or final_answer) and reasoning."
)
REVISE_PROMPT = (
    "Revise the plan: call submit_thought with a new plan for the work that is left "
    "(the steps so far are listed above)."
)
FINAL_PROMPT = "Write the final answer to the task from the results of the steps."


class PlanAndExecute:
    """The plan-and-execute loop over `tools`, thinking with `llm`."""

    def __init__(
        self,
        llm: LLM,
        tools: Sequence[Tool],
        *,
        instructions: str = "",
        max_revisions: int = 2,
        max_steps: int = 20,
        structured_retries: int = 1,
    ) -> None:
        if max_revisions < 0 or max_steps < 1 or structured_retries < 0:
            raise ConfigError(
                "PlanAndExecute needs max_revisions >= 0, max_steps >= 1 and "
                f"structured_retries >= 0 (got {max_revisions}, {max_steps}, {structured_retries})"
            )
        self.llm = llm
        self.tools = {tool.name: tool for tool in tools}
        self.instructions = instructions
        self.max_revisions = max_revisions
        self.max_steps = max_steps
        self.structured_retries = structured_retries

    async def run(self, task: str, context: ToolContext | None = None) -> ExecutionResult:
        """Plan `task`, then execute the plan. Never raises for a tool's or the model's
        mistakes: they show in the result."""
        thought = await self.think(task)
        if thought is None:
            return ExecutionResult(
                success=False,
                final_result="I could not make a plan for this task.",
                total_steps=0,
            )
        return await self.execute(task, thought, context)

    async def think(self, task: str, history: Sequence[dict[str, Any]] = ()) -> Thought | None:
        """A first plan (no `history`) or a revised one; None if the model gives none."""
        prompt = PLAN_PROMPT if not history else f"{_history(history)}\n\n{REVISE_PROMPT}"
        return await self._structured(task, prompt, THOUGHT_TOOL, Thought)

    async def execute(
        self, task: str, thought: Thought, context: ToolContext | None = None
    ) -> ExecutionResult:
        """Run `thought`'s plan step by step, analysing each result."""
        if thought.action == "request_clarification":
            question = thought.clarification_needed or "Could you tell me more about the task?"
            return ExecutionResult(success=False, final_result=question, total_steps=0)
        history: list[dict[str, Any]] = []
        plan, position, revisions = list(thought.plan), 0, 0
        stopped = ""
        while position < len(plan):
            if len(history) >= self.max_steps:
                stopped = f"the step limit ({self.max_steps}) was reached"
                break
            step = plan[position]
            result = await self._run_step(step, context)
            entry: dict[str, Any] = {
                "step": len(history) + 1,
                "tool_name": step.tool_name,
                "parameters": step.parameters,
                "description": step.description,
                "result": result.content,
                "is_error": result.is_error,
            }
            history.append(entry)
            analysis = await self._analyse(task, history, plan[position + 1 :])
            entry["analysis"] = analysis.model_dump()
            if analysis.next_action == "final_answer":
                break
            if analysis.next_action == "continue_plan":
                position += 1
                continue
            if revisions >= self.max_revisions:
                stopped = f"the revision limit ({self.max_revisions}) was reached"
                break
            revised = await self.think(task, history)
            revisions += 1
            if revised is None or revised.action == "request_clarification":
                stopped = "the plan could not be revised"
                break
            plan, position = list(revised.plan), 0
        final = await self._synthesize(task, history, stopped)
        failed_last = bool(history) and bool(history[-1]["is_error"])
        return ExecutionResult(
            success=not stopped and not failed_last,
            final_result=final,
            execution_history=history,
            total_steps=len(history),
            revisions=revisions,
        )

    # -- as a tool and as a worker -------------------------------------------------------

    def as_tool(self, name: str = "plan_and_execute") -> Tool:
        """A tool running the loop on a task; its result is the `ExecutionResult` (JSON)."""

        async def plan_and_execute(task: str, context: ToolContext) -> ExecutionResult:
            return await self.run(task, context)

        return Tool(
            plan_and_execute,
            name=name,
            description="Plan a multi-step task, run it tool by tool, and answer with the result.",
        )

    def as_agent(self, agent_id: str, *, description: str = "", **fields: Any) -> Agent:
        """A worker agent that runs the loop on every task it gets and answers with the final
        result, so `hub.delegate(worker, task, ...)` returns the final answer text."""
        tool = self.as_tool()
        driver = ScriptedLLM(
            [
                {
                    "match": ["*"],
                    "tool": tool.name,
                    "arguments": {"task": "{message}"},
                    "reply": "{result.final_result}",
                }
            ]
        )
        return Agent(id=agent_id, description=description, llm=driver, tools=(tool,), **fields)

    # -- the steps of the loop -----------------------------------------------------------

    async def _run_step(self, step: PlanStep, context: ToolContext | None) -> ToolResult:
        tool = self.tools.get(step.tool_name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolResult(
                "",
                step.tool_name,
                f"error: unknown tool {step.tool_name!r}; available tools: {known}",
                is_error=True,
            )
        return await tool.invoke(step.parameters, context)

    async def _analyse(
        self, task: str, history: list[dict[str, Any]], remaining: list[PlanStep]
    ) -> AnalysisResult:
        last = history[-1]
        outcome = "failed" if last["is_error"] else "succeeded"
        left = ", ".join(s.tool_name for s in remaining) or "none"
        prompt = (
            f"Step {last['step']} ({last['tool_name']}) {outcome}.\n"
            f"Result: {last['result']}\nRemaining steps: {left}\n\n{ANALYSIS_PROMPT}"
        )
        analysis = await self._structured(task, prompt, ANALYSIS_TOOL, AnalysisResult)
        if analysis is not None:
            return analysis
        # No usable analysis: carry on after a success, rethink after a failure.
        return AnalysisResult(
            evaluation="no analysis was given",
            next_action="revise_plan" if last["is_error"] else "continue_plan",
        )

    async def _synthesize(self, task: str, history: list[dict[str, Any]], stopped: str) -> str:
        note = f"\nThe run stopped early: {stopped}. Say what is missing." if stopped else ""
        messages = self._messages(task, f"{_history(history)}\n\n{FINAL_PROMPT}{note}")
        turn = await complete(self.llm, messages, (), tool_choice="none")
        if turn.text.strip():
            return turn.text.strip()
        good = [h["result"] for h in history if not h["is_error"]]
        return good[-1] if good else f"No result: {stopped or 'no step succeeded'}."

    async def _structured(
        self, task: str, prompt: str, tool_name: str, model: type[_Model]
    ) -> _Model | None:
        """The model's answer as `model`, through a forced call of `tool_name`."""
        schema = model.model_json_schema()
        schema.pop("title", None)
        spec = ToolSpec(name=tool_name, description=model.__doc__ or "", parameters=schema)
        messages = self._messages(task, prompt)
        for _ in range(self.structured_retries + 1):
            turn = await complete(self.llm, messages, [spec], tool_choice=tool_name)
            call = next((c for c in turn.tool_calls if c.name == tool_name), None)
            if call is not None:
                try:
                    return model.model_validate_json(call.arguments)
                except ValidationError as exc:
                    problem = f"its arguments were invalid: {exc.errors()[0]['msg']}"
            else:
                problem = "there was no call"
            messages = [
                *messages,
                ChatMessage(role="assistant", content=turn.text),
                ChatMessage(role="system", content=f"Call {tool_name} ({problem})."),
            ]
        return None

    def _messages(self, task: str, prompt: str) -> list[ChatMessage]:
        catalogue = "\n".join(f"- {_signature(t)}" for t in self.tools.values()) or "- none"
        system = f"{self.instructions}\n\nTools you can plan with:\n{catalogue}".strip()
        return [
            ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=task),
            ChatMessage(role="system", content=prompt),
        ]


def _signature(tool: Tool) -> str:
    names = ", ".join(tool.spec.parameters.get("properties", {}))
    return f"{tool.name}({names}): {tool.description}"


def _history(history: Sequence[dict[str, Any]]) -> str:
    if not history:
        return "No steps have run yet."
    lines = ["Steps so far:"]
    for entry in history:
        outcome = "failed" if entry["is_error"] else "ok"
        arguments = json.dumps(entry["parameters"])
        lines.append(
            f"{entry['step']}. {entry['tool_name']} {arguments} -> {outcome}: {entry['result']}"
        )
    return "\n".join(lines)
