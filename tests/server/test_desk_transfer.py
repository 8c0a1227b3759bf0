"""Transfers for browser and WebSocket callers, over the real WebSocket: the triage desk hands
the caller to the service line desk (swarm), the conversation kept: the client gets a
`transfer` event and the call ends; connecting where it says, the caller finds the
conversation's last turns carried over and is greeted by the new desk."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.agents.tools import ToolContext
from voicehub.core.clock import VirtualClock
from voicehub.core.events import ChannelType, Event, EventKind
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub.tools.call_control import TransferPlan, TransferTarget
from voicehub.tools.telephony import send_dtmf_tool, transfer_call_tool
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


class Browser:
    """A WebSocket caller that acks every speech mark and keeps every event."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for message in self.socket:
                if isinstance(message, bytes):
                    continue
                event = json.loads(message)
                self.events.append(event)
                if event["type"] == "speech_mark":
                    await self.socket.send(json.dumps({"type": "playout", "id": event["id"]}))
        except ConnectionClosed:
            pass


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[RunningServer, VirtualClock]]:
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    loaded = load_desks(CHANNELS)
    desks = {name: loaded[name] for name in ("triage", "swarm")}
    clock = VirtualClock()
    async with running_server(
        settings, voice=ScriptedStack(), desks=desks, phone_clock=clock
    ) as running:
        yield running, clock


async def session_of(running: RunningServer, count: int) -> ScriptedSession:
    factory: ScriptedStack = running.switchboard.lifecycle.voice  # type: ignore[assignment]

    await until(lambda: len(factory.sessions) > count, timeout=10)
    return factory.sessions[count]


async def test_a_browser_caller_is_handed_to_another_desk_with_the_conversation(
    server: tuple[RunningServer, VirtualClock],
) -> None:
    running, clock = server
    hub = running.switchboard.hub
    async with connect(f"{running.ws_url}/desks/triage/call?conversation=alice") as socket:
        browser = Browser(socket)
        session = await session_of(running, 0)
        await hub.post(
            "triage:alice",
            Event(
                kind=EventKind.TRANSCRIPT,
                text="I was charged twice this month",
                source="caller",
                source_type=ChannelType.VOICE,
                role="user",
            ),
        )
        [tool] = [t for t in running.switchboard.desks["triage"].agents["triage"].tools
                  if t.name == "transfer_call"]  # fmt: skip
        context = ToolContext(hub=hub, room_id="triage:alice", agent_id="triage")
        result = await tool.invoke({"target": "billing", "summary": "Charged twice"}, context)
        assert result.data["say"] == "I'm transferring you to the Service line now."
        await session.say(result.data["say"])
        await clock.advance(1.0)
        await asyncio.wait_for(browser.reader, 10)  # the server ends this call
        assert socket.close_code == 1000 and "transferred to desk swarm" in socket.close_reason
    [transfer] = [e for e in browser.events if e["type"] == "transfer"]
    assert transfer == {
        "type": "transfer",
        "desk": "swarm",
        "title": "Service line",
        "conversation": "alice",
        "url": "/desks/swarm/call?conversation=alice",
    }

    # Following it: the same conversation at the new desk, its greeting waiting.
    async with connect(running.ws_url + transfer["url"]) as socket:
        Browser(socket)
        arrived = await session_of(running, 1)
        assert arrived.room_id == "swarm:alice" and arrived.greeting is None  # resumed

        await until(lambda: arrived.said, timeout=10)
        assert arrived.said == [running.switchboard.desks["swarm"].greeting]
    history = [e.text for e in await hub.store.list_events("swarm:alice")]
    assert "I was charged twice this month" in history
    assert "The caller was transferred here from triage. Charged twice" in history
    old = await hub.store.get_room("triage:alice")
    assert old is not None and old.metadata["transfers"][0]["outcome"] == "handed over"


async def test_what_a_browser_call_cannot_do_is_refused_and_it_goes_on(
    server: tuple[RunningServer, VirtualClock],
) -> None:
    running, _ = server
    hub = running.switchboard.hub
    async with connect(f"{running.ws_url}/desks/triage/call?conversation=bob") as socket:
        browser = Browser(socket)
        await session_of(running, 0)
        context = ToolContext(hub=hub, room_id="triage:bob", agent_id="triage")
        phone_only = TransferPlan(
            targets={"sales": TransferTarget(name="sales", phone="+15550100500")}
        )
        refused = await transfer_call_tool(phone_only).invoke({"target": "sales"}, context)
        assert refused.data["error"] == (
            "sales can only be reached by phone, and this call is not on a phone line."
        )
        tones = await send_dtmf_tool().invoke({"digits": "1"}, context)
        assert tones.data["status"] == "refused" and "keypad" in tones.data["error"]
        text_room = ToolContext(hub=hub, room_id="triage:nobody", agent_id="triage")
        nowhere = await transfer_call_tool(phone_only).invoke({"target": "sales"}, text_room)
        assert nowhere.data["error"] == "there is no live call in this conversation to transfer"
        assert "triage:bob" in running.switchboard.calls and not browser.reader.done()
