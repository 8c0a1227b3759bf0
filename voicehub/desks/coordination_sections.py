"""The `[manager]` and `[blackboard]` tables of a desk file (see `voicehub.desks.loading`).

Both give one agent that talks with the caller a tool that hands work on: `delegate` (with
`list_agents` and `list_workflows` run before each model call) and `start_report`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from voicehub.desks.sections import PositiveSeconds, Slug, StrictModel, field_error

ManagerMode = Literal["background", "answer"]


class ManagerConfig(StrictModel):
    """A manager agent routing work to agents and workflows by name (`delegate`).

    `agent` defaults to the desk's front agent. It may delegate to `agents` (the desk's own;
    all but itself when not given), to the agents of the desk files named in `desks` (same
    folder), and to `workflows` (files in `workflows/` next to the desk file; all of them
    when not given). `mode = "background"` answers `delegate` at once and delivers the result
    like `delegate_workers`; `"answer"` waits and answers the tool with the result.
    """

    agent: str | None = None
    """The agent that gets `delegate` (and `list_agents`, `list_workflows`); default: the front
    agent."""
    agents: tuple[str, ...] | None = None
    """The desk's own agents it may delegate to; unset: all but itself."""
    desks: tuple[Slug, ...] = ()
    """Other desk files in this folder whose workers it may delegate to."""
    workflows: tuple[str, ...] | None = None
    """Workflow files (`workflows/*.toml` next to the desk file) it may run; unset: all of them."""
    mode: ManagerMode = "background"
    """`background`: `delegate` answers at once and the result is delivered later; `answer`: the
    tool waits and answers with the result."""
    task_timeout: PositiveSeconds | None = None
    """Seconds a delegation may take; unset: no limit."""
    delegation_message: str | None = None
    """With `background`: what `delegate` answers at once."""

    @model_validator(mode="after")
    def _message_fits_mode(self) -> ManagerConfig:
        if self.mode == "answer" and self.delegation_message is not None:
            raise field_error(
                "delegation_message", "mode 'answer' speaks the result itself: remove it"
            )
        return self


class BlackboardConfig(StrictModel):
    """An orchestrator coordinating a researcher, a planner and a writer through a board of
    targets, findings, plans and artifacts. `agent` (default: the front agent) gets
    `start_report(request)`, which returns at once; the session runs in the background and
    its artifacts are delivered. It ends on `finish_session` or after `max_steps` steps."""

    agent: str | None = None
    """The agent that gets `start_report`; default: the front agent."""
    orchestrator: str
    """The agent that runs the session over the board (targets, findings, plans, artifacts)."""
    researcher: str
    """The specialist that finds facts."""
    planner: str
    """The specialist that outlines."""
    writer: str
    """The specialist that writes the artifact."""
    max_steps: int = Field(default=30, ge=1, le=200)
    """The session ends after this many steps (1-200) if `finish_session` has not ended it."""
    task_timeout: PositiveSeconds | None = None
    """Seconds each step may take; unset: no limit."""
    delegation_message: str | None = None
    """What `start_report` answers at once."""

    @property
    def specialists(self) -> dict[str, str]:
        """Field name -> agent id, for the three specialists."""
        return {"researcher": self.researcher, "planner": self.planner, "writer": self.writer}
