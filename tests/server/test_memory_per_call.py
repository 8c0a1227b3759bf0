"""Ended calls leave nothing behind: after N calls through the real server (uvicorn, the
embedded stack, the research desk delegating to its analysts), at most one call's objects
are alive, whatever N.

Object counts after a full collection, not RSS: a leak of one object per call fails the
test. "At most one" and not zero: the last call's session may still be referenced for a
moment by a worker thread finishing its synthesis or VAD inference (a thread's frame, not
something to wait on), after which it is collected.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import math
import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from voicehub.client.call import CallClient, CallOptions
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio, pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
CALLS = 4

# What one call creates on the server, by class name: the call and its transport, the
# voice session with livekit's AgentSession and streams, the room and its delivery queue.
PER_CALL_TYPES = frozenset(
    {
        "LiveCall",
        "WebSocketTransport",
        "LiveKitVoiceSession",
        "VoiceActivity",
        "CallerAudioInput",
        "TransportAudioOutput",
        "DeskOnCall",
        "LiveKitAgent",
        "AgentSession",
        "AgentActivity",
        "AudioRecognition",
        "VADStream",
        "Room",
        "_RoomQueue",
        "TaskHandle",
    }
)


def live_objects(names: Iterable[str]) -> dict[str, int]:
    """Live objects per class name (of `names`) after a full collection."""
    wanted = frozenset(names)
    gc.collect()
    counts = collections.Counter(
        type(o).__name__ for o in gc.get_objects() if type(o).__name__ in wanted
    )
    return {name: counts[name] for name in sorted(wanted)}


async def one_call(server: RunningServer, conversation: str, speech: bytes) -> None:
    """A fast call that asks for research and waits for the result, then hangs up; returns
    once the server has cleaned the call up and every task the call started has ended."""
    before = asyncio.all_tasks()
    options = CallOptions(
        desk="research",
        server=server.url,
        conversation=conversation,
        realtime=False,
        playout_speed=math.inf,
    )
    async with CallClient(options) as call:
        assert call.report.room_id is not None
        live = server.switchboard.calls[call.report.room_id]
        await call.wait_for_turn()
        await call.say(speech, "research")
        await call.settle(60)
        await call.hangup()
    await asyncio.wait_for(live.finished.wait(), 30)
    # livekit's session winds down a few tasks after `aclose` returns; they hold the call.
    started = asyncio.all_tasks() - before - {asyncio.current_task()}
    if started:
        _, running = await asyncio.wait(started, timeout=30)
        assert not running, f"tasks of an ended call still running: {running}"


async def test_ended_calls_leave_no_per_call_objects(tmp_path: Path) -> None:
    speech = spoken("could you research heat pumps for me please")
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    async with running_server(settings, desks=desks) as server:
        for number in range(CALLS):
            await one_call(server, f"leak-{number}", speech)
        hub = server.switchboard.hub
        assert not server.switchboard.calls
        assert not hub.rooms
        kept = {name: count for name, count in live_objects(PER_CALL_TYPES).items() if count > 1}
        assert kept == {}, f"objects of {CALLS} ended calls still alive: {kept}"
        assert server.switchboard.memory.trims >= 1  # freed memory went back to the system
