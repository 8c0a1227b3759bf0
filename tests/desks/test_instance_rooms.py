"""A process's side of instance loss: which desk setting applies to a room, and loading a
room taken over from a lost instance with its desk's agents."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import load_desks
from voicehub.desks.instance_rooms import DeskRooms
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.errors import VoicehubError
from voicehub.hub import Hub

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


@pytest.fixture
async def rooms() -> DeskRooms:
    desks = load_desks(CHANNELS)
    research = desks["research"]
    assert research.config.supervisor is not None
    failing = research.config.supervisor.model_copy(update={"on_instance_loss": "fail"})
    config = research.config.model_copy(update={"name": "strict", "supervisor": failing})
    desks["strict"] = dataclasses.replace(research, config=config)
    hub = Hub(orchestration=None)
    calls = CallLifecycle(hub, desks, default_voice_stacks())
    return DeskRooms(hub, desks, calls)


async def test_the_room_desk_setting_applies(rooms: DeskRooms) -> None:
    assert rooms.on_instance_loss("research:caller-1") == "retry"
    assert rooms.on_instance_loss("strict:caller-1") == "fail"
    assert rooms.on_instance_loss("triage:caller-1") == "retry"  # no [supervisor]: default
    assert rooms.on_instance_loss("gone:caller-1") == "retry"


async def test_a_taken_over_room_is_loaded_with_its_desk_and_released(rooms: DeskRooms) -> None:
    hub = rooms.hub
    await rooms.open_room("research:caller-1")
    assert hub.agent("analyst-b", "research:caller-1").id == "analyst-b"
    assert hub.rooms["research:caller-1"].metadata["desk"] == "research"
    await rooms.release_room("research:caller-1")
    assert "research:caller-1" not in hub.rooms
    await hub.aclose()


async def test_a_room_of_a_desk_not_served_here_is_refused_naming_the_desks(
    rooms: DeskRooms,
) -> None:
    with pytest.raises(VoicehubError, match=r"'gone:caller-1': its desk is not served here \("):
        await rooms.open_room("gone:caller-1")
