"""The agent spec: who an agent is, what it may do, and which model it runs on."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, field_validator

from voicehub.agents.llm import LLM
from voicehub.agents.tools import Tool


class Agent(BaseModel):
    """A declarative agent. `llm` is any object implementing the `LLM` protocol."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    id: str
    role: str = ""
    description: str = ""
    instructions: str = ""
    llm: SkipValidation[LLM] | None = None
    tools: tuple[Tool, ...] = ()
    keywords: tuple[str, ...] = ()
    when_to_use: str = ""
    when_not_to_use: str = ""
    voice: str | None = None
    max_steps: int = Field(default=30, ge=1)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id_is_usable(cls, value: str) -> str:
        if not value or any(ch.isspace() for ch in value):
            raise ValueError(f"agent id {value!r} must be non-empty and contain no spaces")
        return value

    def with_tools(self, *tools: Tool) -> Agent:
        """A copy of this agent with `tools` added (replacing tools of the same name)."""
        names = {t.name for t in tools}
        kept = tuple(t for t in self.tools if t.name not in names)
        return self.model_copy(update={"tools": kept + tuple(tools)})

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
