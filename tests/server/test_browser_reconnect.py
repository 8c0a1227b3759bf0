"""The console page comes back to its conversation when the line drops: in headless Chromium
(Debian's, driven by Playwright), a call over the WebSocket and one over WebRTC are handed
over by the server (what a draining instance does: close 1012, or over WebRTC an announced
1012 and the data channel closed); the page reconnects at once with the same conversation
and `resume=1` (re-offering, for WebRTC), and the call goes on. The server runs the scripted
session (no models): what is tested is the page's reconnect."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_helpers import RunningServer, running_server
from tests.server.test_browser import CHROMIUM, caller_wav, chromium_args, require_chromium
from tests.webrtc_helpers import loopback_ice
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

pytest.importorskip("aiortc")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TIMEOUT_MS = 30_000


@pytest.fixture(autouse=True)
def loopback() -> Iterator[None]:
    with loopback_ice():
        yield


async def live_call(server: RunningServer, room_id: str, count: int) -> Any:
    """The server's live call of `room_id` once `count` calls of it have started."""
    factory = server.switchboard.lifecycle.voice
    assert isinstance(factory, ScriptedStack)

    for _ in range(TIMEOUT_MS // 50):  # the server's state, polled from the test
        sessions = [s for s in factory.sessions if s.room_id == room_id]
        if len(sessions) >= count and room_id in server.switchboard.calls:
            return server.switchboard.calls[room_id]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} calls of {room_id} never started")


async def test_the_console_reconnects_to_its_conversation_when_its_call_is_handed_over(
    tmp_path: Path,
) -> None:
    require_chromium()
    from playwright import async_api as playwright

    expect = playwright.expect
    wav = caller_wav(tmp_path / "caller.wav", before=60.0)  # the caller stays quiet
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    desks = {"research": load_desks(CHANNELS)["research"]}
    factory = ScriptedStack()
    problems: list[str] = []
    urls: list[str] = []
    async with (
        running_server(settings, voice=factory, desks=desks) as server,
        playwright.async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=chromium_args(wav))
        try:
            page = await browser.new_page()
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("websocket", lambda socket: urls.append(socket.url))
            page.on("request", lambda r: "/webrtc?" in r.url and urls.append(r.url))
            await page.goto(server.url + "/")
            await page.select_option("#desk", "research")
            for transport in ("websocket", "webrtc"):
                room = f"research:browser-back-{transport}"
                await page.select_option("#transport", transport)
                await page.fill("#conversation", room.split(":", 1)[1])
                await page.click("#call")
                first = await live_call(server, room, 1)
                await server.switchboard.lifecycle.hand_over(first)  # a drain would do this
                second = await live_call(server, room, 2)
                assert second is not first and second.takeover.continuation == "handover"
                await expect(page.locator("#status")).to_contain_text(
                    "conversation resumed", timeout=TIMEOUT_MS
                )
                await page.click("#hangup")
                await expect(page.locator("#status")).to_contain_text("Call ended")
                await asyncio.wait_for(second.finished.wait(), 10)
                assert second.outcome == "hung_up"
                calls = [u for u in urls if room.split(":", 1)[1] in u]
                assert len(calls) == 2, calls
                assert "resume=1" not in calls[0] and "resume=1" in calls[1], calls
        finally:
            await browser.close()
    assert problems == []
