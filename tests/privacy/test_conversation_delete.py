"""Deleting a conversation through the real server (uvicorn, a WebSocket call on a scripted
session, the SQLite store, recordings on disk): refused while the call is on, then every
record and file of it is gone and the other conversation is untouched."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.e2e_helpers import RunningServer, running_server
from voicehub.core.events import Event, EventKind
from voicehub.core.store.base import DeliveryStatus
from voicehub.desks.desk import Desk, build_desk, load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOKEN = "a-long-enough-test-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def recorded(desk: Desk) -> Desk:
    record = desk.config.record.model_copy(update={"audio": True, "transcript": True})
    return build_desk(desk.config.model_copy(update={"record": record}), base_dir=CHANNELS)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    desks = {"research": recorded(load_desks(CHANNELS)["research"])}
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db", token=TOKEN)
    async with running_server(settings, voice=ScriptedStack(), desks=desks) as running:
        yield running


async def play_out(ws: ClientConnection, until: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        message = await asyncio.wait_for(ws.recv(), 10.0)
        if isinstance(message, bytes):
            continue
        event = json.loads(message)
        seen.append(event)
        if event["type"] == "speech_mark":
            await ws.send(json.dumps({"type": "playout", "id": event["id"]}))
        if event["type"] == until:
            return seen


async def hang_up(server: RunningServer, ws: ClientConnection, room_id: str) -> None:
    await ws.send(json.dumps({"type": "hangup"}))
    async for _ in ws:
        pass
    live = server.switchboard.calls.get(room_id)
    if live is not None:
        await live.finished.wait()
    await server.parts.recordings.aclose()  # the files are written


async def delete(server: RunningServer, room_id: str, **options: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url) as client:
        return await client.delete(f"/api/rooms/{room_id}", **options)


@pytest.mark.slow
async def test_a_conversation_is_deleted_with_everything_keyed_to_it(
    server: RunningServer,
) -> None:
    hub, store = server.switchboard.hub, server.switchboard.hub.store
    for conversation in ("gone", "kept"):
        url = f"{server.ws_url}/desks/research/call?conversation={conversation}&token={TOKEN}"
        async with connect(url) as ws:
            await play_out(ws, until="speech_mark")  # the greeting
            said = Event(kind=EventKind.TRANSCRIPT, text="my number is 555 0100")
            await hub.post(f"research:{conversation}", said)
            await hub.deliver(f"research:{conversation}", "Here is what I found.")
            await play_out(ws, until="delivery")
            if conversation == "gone":
                refused = await delete(server, "research:gone", headers=BEARER)
                assert refused.status_code == 409
                assert "call in progress" in refused.json()["message"]
            await hang_up(server, ws, f"research:{conversation}")
        # a result for the caller who hung up: held for their call-back
        await hub.deliver(f"research:{conversation}", "One more thing I found.")
    held = await store.list_deliveries(room_id="research:gone", statuses=[DeliveryStatus.HELD])
    assert len(held) == 1
    folder = server.parts.recordings.folder
    assert folder.list("research:gone") and folder.list("research:kept")

    assert (await delete(server, "research:gone")).status_code == 401
    deleted = await delete(server, "research:gone", headers=BEARER)
    assert deleted.status_code == 200, deleted.text
    summary = deleted.json()["deleted"]
    assert summary["room_id"] == "research:gone" and summary["rooms"] == 1
    assert summary["deliveries"] == 2 and summary["calls"] == 1
    assert summary["events"] > 0 and summary["recording_files"] == 2

    assert (await server.get("/api/rooms/research:gone", headers=BEARER)).status_code == 404
    assert await store.list_events("research:gone") == []
    assert await store.list_deliveries(room_id="research:gone") == []
    assert await store.get_call("research:gone") is None
    assert folder.list("research:gone") == []
    assert (await delete(server, "research:gone", headers=BEARER)).status_code == 404
    # the other conversation keeps all of it
    kept = (await server.get("/api/rooms/research:kept", headers=BEARER)).json()
    assert len(kept["deliveries"]) == 2 and kept["events"]
    assert len(folder.list("research:kept")) == 1
