"""A WebSocket call at the rate it asks for (`?rate=`): 24 kHz is the realtime model's own."""

from __future__ import annotations

from websockets.asyncio.client import connect

from tests.e2e_helpers import RunningServer
from tests.server.test_app import closed, desks, factory, next_event, server, settings
from voicehub_dev.fakes.server_session import ScriptedStack

__all__ = ["desks", "factory", "server", "settings"]  # the fixtures this module uses


async def test_a_call_at_24_khz_takes_960_byte_frames(
    server: RunningServer, factory: ScriptedStack
) -> None:
    async with connect(f"{server.ws_url}/desks/research/call?conversation=r24&rate=24000") as ws:
        session = await next_event(ws, "session")
        assert (session["sample_rate"], session["frame_bytes"]) == (24000, 960)
        await ws.send(bytes(640))  # a 16 kHz frame is not a whole 24 kHz one
        error = await next_event(ws, "error")
        assert error["code"] == "bad_audio_frame" and "multiples of 960 bytes" in error["message"]
        await ws.send(bytes(960 * 3))
        await ws.send('{"type": "hangup"}')
        await closed(ws)
    [built] = factory.sessions
    assert built.transport.sample_rate == 24000


async def test_a_rate_not_offered_is_refused_naming_the_choices(server: RunningServer) -> None:
    async with connect(f"{server.ws_url}/desks/research/call?rate=44100") as ws:
        error = await next_event(ws, "error")
        assert error["code"] == "bad_rate"
        assert "8000, 16000, 24000" in error["message"]
        assert (await closed(ws))[0] == 4400
