"""The retention sweeper on virtual time: conversations past their desk's `keep_days` (from
their last event, delivery or call) go with everything of them; recent ones, busy ones,
ones with a live call on another instance and desks that keep stay."""

from __future__ import annotations

import asyncio
from pathlib import Path

from voicehub.core.clock import VirtualClock
from voicehub.core.events import Event
from voicehub.core.store.base import CallRecord, DeliveryRecord, InstanceRecord, RoomRecord
from voicehub.core.store.memory import MemoryStore
from voicehub.recordings.folder import RecordingFolder
from voicehub.server.erasure import ConversationEraser
from voicehub.server.retention import DAY, RetentionSweeper

NOW = 1_800_000_000.0


class Wall:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


async def conversation(store: MemoryStore, room_id: str, days_ago: float) -> None:
    at = NOW - days_ago * DAY
    await store.create_room(RoomRecord(id=room_id, created_at=at - DAY))
    await store.append_event(Event(room_id=room_id, seq=1, text="hello", created_at=at))


async def test_a_sweep_deletes_only_conversations_past_keep_days(tmp_path: Path) -> None:
    store, wall, clock = MemoryStore(), Wall(), VirtualClock()
    folder = RecordingFolder(tmp_path, b"k" * 32)
    await conversation(store, "research:old", 31)
    folder.save("research:old", NOW, stereo=None, sample_rate=16000, transcript="{}")
    await conversation(store, "research:recent", 29)
    await conversation(store, "research:busy", 31)
    await conversation(store, "drafting:old", 400)  # its desk keeps (0)
    await conversation(store, "research:held", 31)  # a result held for it 2 days ago
    held = DeliveryRecord(id="h", room_id="research:held", content="x", updated_at=NOW - 2 * DAY)
    await store.put_delivery(held)
    await conversation(store, "research:live", 31)  # a call on another instance, idle since
    call = CallRecord(
        room_id="research:live", desk="research", conversation="live", transport="twilio",
        owner="b", updated_at=NOW - 31 * DAY,
    )  # fmt: skip
    await store.swap_call(call, expected_fence=0)
    await store.beat_instance(InstanceRecord(id="b", started_at=0, seen_at=NOW, expires_at=NOW + 9))

    sweeper = RetentionSweeper(
        ConversationEraser(store, folder, wall=wall),
        lambda: {"research": 30.0, "drafting": 0.0},
        lambda room_id: room_id == "research:busy",
        clock,
    )
    assert await sweeper.sweep() == ["research:old"]
    assert await store.list_events("research:old") == []
    assert folder.list("research:old") == []
    kept = sorted(room.id for room in await store.list_rooms())
    assert kept == [
        "drafting:old",
        "research:busy",
        "research:held",
        "research:live",
        "research:recent",
    ]


async def test_the_sweeper_runs_at_start_and_every_hour_on_its_clock(tmp_path: Path) -> None:
    store, wall, clock = MemoryStore(), Wall(), VirtualClock()
    await conversation(store, "research:old", 31)
    await conversation(store, "research:aging", 30 - 1 / 48)  # 30 days old in half an hour
    passes: asyncio.Queue[list[str]] = asyncio.Queue()
    sweeper = RetentionSweeper(
        ConversationEraser(store, RecordingFolder(tmp_path, b"k" * 32), wall=wall),
        lambda: {"research": 30.0},
        lambda room_id: False,
        clock,
        on_sweep=passes.put_nowait,
    )
    sweeper.start()
    assert await asyncio.wait_for(passes.get(), 10) == ["research:old"]
    wall.now += 1800
    await clock.advance(1800)  # not yet the next sweep
    assert passes.empty()
    assert [room.id for room in await store.list_rooms()] == ["research:aging"]
    wall.now += 1800
    await clock.advance(1800)
    assert await asyncio.wait_for(passes.get(), 10) == ["research:aging"]
    assert await store.list_rooms() == [] and sweeper.deleted == 2
    await sweeper.aclose()
