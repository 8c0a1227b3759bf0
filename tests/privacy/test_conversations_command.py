"""`voicehub conversations delete` on a SQLite store as an operator types it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from voicehub.cli import main
from voicehub.core.events import Event
from voicehub.core.store.base import CallRecord, DeliveryRecord, InstanceRecord, RoomRecord
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.recordings.folder import RecordingFolder


async def fill(db: Path, room_id: str, *, owner: str = "") -> None:
    store = SQLiteStore(db)
    await store.create_room(RoomRecord(id=room_id))
    await store.append_event(Event(room_id=room_id, seq=1, text="call me on +15550100"))
    await store.put_delivery(DeliveryRecord(id=f"{room_id}-d", room_id=room_id, content="x"))
    if owner:
        desk, _, conversation = room_id.partition(":")
        live = CallRecord(
            room_id=room_id, desk=desk, conversation=conversation, transport="ws", owner=owner
        )
        await store.swap_call(live, expected_fence=0)
        now = time.time()
        beat = InstanceRecord(id=owner, started_at=now, seen_at=now, expires_at=now + 60)
        await store.beat_instance(beat)
    await store.close()


def test_delete_removes_the_conversation_and_its_recordings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_STORE", raising=False)
    db = tmp_path / "voicehub.db"
    asyncio.run(fill(db, "research:gone"))
    asyncio.run(fill(db, "research:live", owner="instance-a"))
    recordings = RecordingFolder(tmp_path / "recordings", b"k" * 32)
    recordings.save("research:gone", 0.0, stereo=None, sample_rate=16000, transcript="{}")

    assert main(["conversations", "delete", "research:gone", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "research:gone: deleted 1 rooms, 1 events, 0 tasks, 1 deliveries" in out
    assert "1 recording files" in out
    assert recordings.list("research:gone") == []

    assert main(["conversations", "delete", "research:gone", "--db", str(db)]) == 1
    assert "research:gone: nothing stored in" in capsys.readouterr().out

    assert main(["conversations", "delete", "research:live", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "has a call in progress on instance 'instance-a'" in err

    async def remaining() -> list[str]:
        store = SQLiteStore(db)
        try:
            return [room.id for room in await store.list_rooms()]
        finally:
            await store.close()

    assert asyncio.run(remaining()) == ["research:live"]


def test_sweep_applies_each_desks_keep_days(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEHUB_STORE", raising=False)
    channels = tmp_path / "channels"
    channels.mkdir()
    for name, days in (("short", 1), ("forever", 0)):
        (channels / f"{name}.toml").write_text(
            f'name = "{name}"\n[privacy]\nkeep_days = {days}\n'
            '[[agents]]\nid = "desk"\n[[agents.scripted.rules]]\nmatch = ["hi"]\nsay = "Hi."\n'
        )
    db = tmp_path / "voicehub.db"

    async def old(room_id: str) -> None:
        store = SQLiteStore(db)
        await store.create_room(RoomRecord(id=room_id, created_at=time.time() - 3 * 86400))
        await store.close()

    for room_id in ("short:old", "forever:old"):
        asyncio.run(old(room_id))
    argv = ["conversations", "sweep", "--db", str(db), "--channels", str(channels)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "deleted 1 conversations (keep_days: short 1 days)" in out and "short:old" in out
