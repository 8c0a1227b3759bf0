"""Conversation state: which phase a room is in, which agent handles it, and how it got there.

The state is an immutable pydantic model kept in the room metadata under
`_conversation_state` as plain JSON, so it survives the store (memory or SQLite) and a
reconnecting call finds its conversation where it left it. Change it with
`state.transition(...)`, which returns a new state with an audit record appended, and save it
with `await set_conversation_state(room, state)`.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from voicehub.errors import StoreError

STATE_KEY = "_conversation_state"
"""The room metadata key the conversation state is stored under."""

HUMAN = "human"
"""The special handoff target: a person takes over and no agent answers until handed back."""


class ConversationPhase(StrEnum):
    """Built-in phase names. Any non-empty string is a valid phase; these are conventions."""

    INTAKE = "intake"
    QUALIFICATION = "qualification"
    HANDLING = "handling"
    ESCALATION = "escalation"
    RESOLUTION = "resolution"
    FOLLOWUP = "followup"


def _plain_phase(value: object) -> str:
    # A StrEnum member and its string must give equal, identically serialised states.
    text = str(value)
    if not text.strip():
        raise ValueError("a phase name must be a non-empty string")
    return text


class PhaseTransition(BaseModel):
    """One audit record: the conversation moved from one phase/agent to another, and why."""

    model_config = ConfigDict(frozen=True)

    from_phase: str
    to_phase: str
    from_agent: str | None = None
    to_agent: str | None = None
    reason: str = ""
    at: float = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("from_phase", "to_phase", mode="before")
    @classmethod
    def _phase_is_text(cls, value: object) -> str:
        return _plain_phase(value)


class ConversationState(BaseModel):
    """Where a conversation stands. Immutable: `transition` returns a new state.

    `active_agent_id` is the agent that answers (None before routing, or while a human has the
    conversation: then `awaiting_human` is True). `handoff_summary` and `previous_agent_id`
    describe the latest handoff, for the receiving agent's memory.
    """

    model_config = ConfigDict(frozen=True)

    phase: str = ConversationPhase.INTAKE.value
    active_agent_id: str | None = None
    previous_agent_id: str | None = None
    handoff_count: int = Field(default=0, ge=0)
    handoff_summary: str | None = None
    awaiting_human: bool = False
    phase_history: tuple[PhaseTransition, ...] = ()

    @field_validator("phase", mode="before")
    @classmethod
    def _phase_is_text(cls, value: object) -> str:
        return _plain_phase(value)

    def transition(
        self,
        to_phase: str,
        to_agent: str | None,
        reason: str = "",
        *,
        summary: str | None = None,
        from_agent: str | None = None,
        at: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ConversationState:
        """A new state in `to_phase` handled by `to_agent` (`HUMAN` for a person, or None to
        leave the choice to the router), with a `PhaseTransition` appended.

        A change of agent counts as a handoff and records `summary` for the new agent;
        `from_agent` defaults to the current active agent.
        """
        source = from_agent if from_agent is not None else self.active_agent_id
        record = PhaseTransition(
            from_phase=self.phase,
            to_phase=to_phase,
            from_agent=source,
            to_agent=to_agent,
            reason=reason,
            at=time.time() if at is None else at,
            metadata=dict(metadata or {}),
        )
        human = to_agent == HUMAN
        active = None if human else to_agent
        handed_off = active != self.active_agent_id or human != self.awaiting_human
        return self.model_copy(
            update={
                "phase": _plain_phase(to_phase),
                "active_agent_id": active,
                "awaiting_human": human,
                "previous_agent_id": source if handed_off else self.previous_agent_id,
                "handoff_count": self.handoff_count + (1 if handed_off else 0),
                "handoff_summary": summary if handed_off else self.handoff_summary,
                "phase_history": (*self.phase_history, record),
            }
        )

    def to_metadata(self) -> dict[str, Any]:
        """The JSON-compatible form stored in room metadata."""
        return self.model_dump(mode="json")

    @classmethod
    def from_metadata(cls, value: object) -> ConversationState:
        """Parse a stored state (a dict, or its JSON text). Raises pydantic's ValidationError
        or ValueError on a malformed value."""
        if isinstance(value, str | bytes):
            return cls.model_validate(json.loads(value))
        return cls.model_validate(value)


class HasMetadata(Protocol):
    """Anything with room metadata: a live `Room` or a stored `RoomRecord`."""

    @property
    def id(self) -> str: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


def get_conversation_state(room: HasMetadata) -> ConversationState:
    """The room's conversation state, or a fresh one (phase intake, no agent) if none is set.

    Raises StoreError naming the room if the stored value is not a valid state.
    """
    stored = room.metadata.get(STATE_KEY)
    if stored is None:
        return ConversationState()
    if isinstance(stored, ConversationState):
        return stored
    try:
        return ConversationState.from_metadata(stored)
    except (ValidationError, ValueError) as exc:
        raise StoreError(
            f"room {room.id!r}: metadata[{STATE_KEY!r}] is not a valid conversation state "
            f"({exc.__class__.__name__}: {str(exc).splitlines()[0]}); fix it or remove the key "
            "to start the conversation over"
        ) from None


class HasSetMetadata(HasMetadata, Protocol):
    """A live room: metadata that can be updated and persisted."""

    async def set_metadata(self, **updates: Any) -> None: ...


async def set_conversation_state(room: HasSetMetadata, state: ConversationState) -> None:
    """Store `state` in the room metadata and persist it through the hub's store."""
    await room.set_metadata(**{STATE_KEY: state.to_metadata()})
