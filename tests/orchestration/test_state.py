"""ConversationState: immutable transitions, and a JSON round trip through room metadata and
the stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from voicehub.errors import StoreError
from voicehub.hub import Hub
from voicehub.orchestration.state import (
    HUMAN,
    STATE_KEY,
    ConversationPhase,
    ConversationState,
    PhaseTransition,
    get_conversation_state,
    set_conversation_state,
)


def test_a_fresh_state_is_in_intake_with_no_agent() -> None:
    state = ConversationState()
    assert state.phase == ConversationPhase.INTAKE
    assert state.active_agent_id is None
    assert state.handoff_count == 0
    assert state.phase_history == ()


def test_builtin_phases_and_any_other_name() -> None:
    assert [p.value for p in ConversationPhase] == [
        "intake",
        "qualification",
        "handling",
        "escalation",
        "resolution",
        "followup",
    ]
    custom = ConversationState(phase="code-review")
    assert custom.phase == "code-review"
    # An enum member is stored as its plain string, so states compare and serialise alike.
    assert type(ConversationState(phase=ConversationPhase.HANDLING).phase) is str
    with pytest.raises(ValidationError, match="non-empty"):
        ConversationState(phase=" ")


def test_transition_returns_a_new_state_with_an_audit_record() -> None:
    start = ConversationState(active_agent_id="triage")
    moved = start.transition(
        ConversationPhase.HANDLING, "billing", "billing question", summary="Account 12345", at=5.0
    )

    assert start.active_agent_id == "triage" and start.phase_history == ()  # unchanged
    assert moved.phase == "handling"
    assert moved.active_agent_id == "billing"
    assert moved.previous_agent_id == "triage"
    assert moved.handoff_count == 1
    assert moved.handoff_summary == "Account 12345"
    assert moved.phase_history == (
        PhaseTransition(
            from_phase="intake",
            to_phase="handling",
            from_agent="triage",
            to_agent="billing",
            reason="billing question",
            at=5.0,
        ),
    )
    with pytest.raises(ValidationError):
        moved.phase = "other"  # type: ignore[misc]


def test_a_phase_change_by_the_same_agent_is_not_a_handoff() -> None:
    state = ConversationState(active_agent_id="a").transition("handling", "b", summary="s1")
    later = state.transition("resolution", "b", "solved")
    assert later.handoff_count == 1
    assert later.handoff_summary == "s1"
    assert later.previous_agent_id == "a"
    assert [t.to_phase for t in later.phase_history] == ["handling", "resolution"]


def test_handing_to_a_human_clears_the_active_agent_until_handed_back() -> None:
    state = ConversationState(active_agent_id="support").transition(
        "escalation", HUMAN, "angry caller"
    )
    assert state.active_agent_id is None
    assert state.awaiting_human
    assert state.phase_history[-1].to_agent == HUMAN

    back = state.transition("handling", "support", "operator done", from_agent=HUMAN)
    assert back.active_agent_id == "support" and not back.awaiting_human
    assert back.previous_agent_id == HUMAN
    assert back.handoff_count == 2


def test_json_round_trip() -> None:
    state = (
        ConversationState(active_agent_id="triage")
        .transition(
            "handling", "billing", "r1", summary="s", metadata={"channel_escalation": "sms"}
        )
        .transition("escalation", HUMAN, "r2")
    )
    text = json.dumps(state.to_metadata())
    assert ConversationState.from_metadata(json.loads(text)) == state
    assert ConversationState.from_metadata(text) == state


async def test_get_and_set_through_room_metadata_and_the_store() -> None:
    hub = Hub()
    room = await hub.create_room("call-1")
    assert get_conversation_state(room) == ConversationState()

    state = ConversationState(active_agent_id="triage").transition("handling", "billing", "r")
    await set_conversation_state(room, state)

    assert get_conversation_state(room) == state
    stored = await hub.store.get_room("call-1")
    assert stored is not None
    assert json.loads(json.dumps(stored.metadata[STATE_KEY])) == state.to_metadata()
    assert get_conversation_state(stored) == state  # a stored RoomRecord reads the same


async def test_a_reopened_room_keeps_its_state() -> None:
    hub = Hub()
    room = await hub.create_room("call-2")
    state = ConversationState().transition("qualification", "sales", "lead")
    await set_conversation_state(room, state)
    await hub.close_room("call-2")

    reopened = await hub.create_room("call-2")
    assert get_conversation_state(reopened) == state


async def test_state_survives_a_restart_on_sqlite(tmp_path: Path) -> None:
    sqlite = pytest.importorskip("voicehub.core.store.sqlite")
    path = tmp_path / "hub.db"
    state = (
        ConversationState(active_agent_id="triage")
        .transition("handling", "billing", "billing question", summary="Account 12345")
        .transition("resolution", "closer", "refund issued")
    )
    hub = Hub(store=sqlite.SQLiteStore(path))
    room = await hub.create_room("call-3")
    await set_conversation_state(room, state)
    await hub.aclose()

    restarted = Hub(store=sqlite.SQLiteStore(path))
    reopened = await restarted.create_room("call-3")
    assert get_conversation_state(reopened) == state
    await restarted.aclose()


async def test_a_corrupt_stored_state_names_the_room() -> None:
    hub = Hub()
    room = await hub.create_room("broken", metadata={STATE_KEY: {"handoff_count": -3}})
    with pytest.raises(StoreError, match=r"room 'broken'.*_conversation_state"):
        get_conversation_state(room)
