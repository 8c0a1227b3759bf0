"""What a scenario file says: the caller's lines, and what the desk must do.

    desk = "research"

    [[scenario]]
    name = "research is dispatched and spoken once"

    [[scenario.steps]]
    say = "could you research heat pumps for me please"     # synthesized speech
    expect_tool = { name = "delegate_workers", arguments = { task = "heat pumps" } }
    expect_reply = "analysts"

    [[scenario.steps]]
    hang_up = true

    [[scenario.steps]]
    call_back = true

    [scenario.expect]
    delivered_once = true
    held_until_call_back = true

Each step is one caller action (`say`, `text`, `keypad`, `silence`, `hang_up`,
`call_back`) with how to do it (`pause` before it, `barge_in` seconds into the agent's
speech, the `voice` of synthesized speech, `wait = false` not to wait for the agent's
answer before the next step) and what must follow it before the next step
(`expect_tool`, `expect_reply`, `expect_handoff`). `[scenario.expect]` holds what the whole
scenario must show. The reference is `docs/scenarios.md`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ACTIONS",
    "ReplyExpectation",
    "Scenario",
    "ScenarioExpectations",
    "ScenarioFile",
    "Step",
    "ToolExpectation",
]

ACTIONS = ("say", "text", "keypad", "silence", "hang_up", "call_back")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolExpectation(_Strict):
    """A tool the agent must call, with at least these arguments (each equal, or for text
    the same words, case and spacing aside)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ReplyExpectation(_Strict):
    """What the agent's reply must say: `contains` (case-insensitive) and/or `matches` (a
    regular expression searched in it)."""

    contains: str | None = None
    matches: str | None = None

    @model_validator(mode="after")
    def _something(self) -> ReplyExpectation:
        if self.contains is None and self.matches is None:
            raise ValueError("give `contains` or `matches` (or both)")
        return self


class Step(_Strict):
    """One caller action and what must follow it."""

    say: str | None = None
    text: str | None = None
    keypad: str | None = Field(default=None, pattern=r"^[0-9*#]+$")
    silence: float | None = Field(default=None, gt=0, le=600)
    hang_up: bool = False
    call_back: bool = False

    pause: float = Field(default=0.0, ge=0, le=600)
    barge_in: float | None = Field(default=None, ge=0, le=60)
    wait: bool = True
    voice: Literal["piper", "espeak"] = "piper"

    expect_tool: ToolExpectation | list[ToolExpectation] | None = None
    expect_reply: ReplyExpectation | None = None
    expect_handoff: str | None = None

    @field_validator("expect_tool", mode="before")
    @classmethod
    def _tool_shorthand(cls, value: Any) -> Any:
        # "delegate_workers" is { name = "delegate_workers" }; a list may mix both forms
        if isinstance(value, str):
            return {"name": value}
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("expect_reply", mode="before")
    @classmethod
    def _reply_shorthand(cls, value: Any) -> Any:
        return {"contains": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        chosen = [name for name in ACTIONS if getattr(self, name) not in (None, False)]
        if len(chosen) != 1:
            found = f"found {', '.join(chosen)}" if chosen else "found none"
            raise ValueError(f"a step takes exactly one of {', '.join(ACTIONS)} ({found})")
        if self.barge_in is not None and self.say is None and not self.hang_up:
            raise ValueError(
                "`barge_in` is for a `say` step (speech over the agent) or a `hang_up`"
            )
        return self

    @property
    def action(self) -> str:
        return next(name for name in ACTIONS if getattr(self, name) not in (None, False))

    @property
    def tools(self) -> list[ToolExpectation]:
        if self.expect_tool is None:
            return []
        return self.expect_tool if isinstance(self.expect_tool, list) else [self.expect_tool]

    def describe(self) -> str:
        action = self.action
        value = getattr(self, action)
        return action.replace("_", " ") if isinstance(value, bool) else f"{action} {value!r}"


class ScenarioExpectations(_Strict):
    """What the whole scenario must show."""

    delivered_once: bool = False
    deliveries: int | None = Field(default=None, ge=0)
    held_until_call_back: bool = False
    voice_to_voice_p95: float | None = Field(default=None, gt=0)
    judge: str | None = None


class Scenario(_Strict):
    """One conversation with the desk, over one or more calls."""

    name: str = Field(min_length=1)
    conversation: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    playout_speed: float = Field(default=16.0, gt=0)
    requires_env: list[str] = Field(default_factory=list)
    timeout: float = Field(default=90.0, gt=0, le=3600)
    steps: list[Step] = Field(min_length=1)
    expect: ScenarioExpectations = Field(default_factory=ScenarioExpectations)


class ScenarioFile(_Strict):
    """A scenario file: the desk it calls and its scenarios (`[[scenario]]`)."""

    desk: str = Field(min_length=1)
    scenario: list[Scenario] = Field(min_length=1)
