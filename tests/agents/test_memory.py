"""Sliding-window memory: the last N spoken events, as the agent sees them."""

from __future__ import annotations

import pytest

from voicehub.agents.llm import ChatMessage
from voicehub.agents.memory import SlidingWindowMemory, event_to_message
from voicehub.core.events import ChannelType, Event, EventKind, message
from voicehub.hub import Hub


def said(
    text: str, source: str, *, role: str = "assistant", kind: EventKind = EventKind.MESSAGE
) -> Event:
    return Event(kind=kind, text=text, source=source, role=role, source_type=ChannelType.AGENT)


async def test_keeps_the_last_n_events() -> None:
    hub = Hub()
    room = await hub.create_room("r")
    for i in range(10):
        await room.post(message(f"m{i}"))
    window = await SlidingWindowMemory(max_events=3).messages(hub, "r", "desk")
    assert [m.content for m in window] == ["m7", "m8", "m9"]


async def test_maps_roles_for_the_reading_agent() -> None:
    hub = Hub()
    room = await hub.create_room("r")
    await room.post(message("hello"))
    await room.post(said("Hi, I'm the desk.", "desk"))
    await room.post(said("Billing here.", "billing"))
    await room.post(
        Event(
            kind=EventKind.DELIVERY,
            text="Your report is ready.",
            source="delivery",
            role="assistant",
        )
    )
    await room.post(Event(kind=EventKind.MESSAGE, text="Be kind.", source="hub", role="system"))
    await room.post(Event(kind=EventKind.TRANSCRIPT, text="spoken words", role="user"))

    window = await SlidingWindowMemory().messages(hub, "r", "desk")
    assert [(m.role, m.content) for m in window] == [
        ("user", "hello"),
        ("assistant", "Hi, I'm the desk."),
        ("user", "[billing] Billing here."),
        ("assistant", "Your report is ready."),
        ("system", "Be kind."),
        ("user", "spoken words"),
    ]
    # The same room read by billing: its own words are the assistant's.
    billing = await SlidingWindowMemory().messages(hub, "r", "billing")
    assert billing[1] == ChatMessage(role="user", content="[desk] Hi, I'm the desk.")
    assert billing[2] == ChatMessage(role="assistant", content="Billing here.")


async def test_skips_tool_events_partials_and_empty_text() -> None:
    hub = Hub()
    room = await hub.create_room("r")
    await room.post(message("question"))
    await room.post(said('{"q": 1}', "desk", kind=EventKind.TOOL_CALL))
    await room.post(said("result", "desk", kind=EventKind.TOOL_RESULT))
    await room.post(message("partial words", partial=True))
    await room.post(message(""))
    await room.post(said("answer", "desk"))
    window = await SlidingWindowMemory().messages(hub, "r", "desk")
    assert [m.content for m in window] == ["question", "answer"]


async def test_tool_events_do_not_shrink_the_window() -> None:
    hub = Hub()
    room = await hub.create_room("r")
    for i in range(4):
        await room.post(message(f"q{i}"))
        for _ in range(3):
            await room.post(said("{}", "desk", kind=EventKind.TOOL_CALL))
            await room.post(said("ok", "desk", kind=EventKind.TOOL_RESULT))
        await room.post(said(f"a{i}", "desk"))
    window = await SlidingWindowMemory(max_events=3).messages(hub, "r", "desk")
    assert [m.content for m in window] == ["a2", "q3", "a3"]


async def test_short_history_is_returned_whole() -> None:
    hub = Hub()
    room = await hub.create_room("r")
    await room.post(message("only"))
    await room.post(said("{}", "desk", kind=EventKind.TOOL_CALL))
    window = await SlidingWindowMemory(max_events=5).messages(hub, "r", "desk")
    assert [m.content for m in window] == ["only"]
    assert await SlidingWindowMemory().messages(hub, "empty-room", "desk") == []


def test_window_must_hold_at_least_one_event() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SlidingWindowMemory(max_events=0)


def test_event_to_message_ignores_system_kinds() -> None:
    assert event_to_message(Event(kind=EventKind.SYSTEM, text="room opened"), "desk") is None
    assert event_to_message(Event(kind=EventKind.TASK, text="task done"), "desk") is None
