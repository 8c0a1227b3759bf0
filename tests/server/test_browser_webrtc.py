"""The console over WebRTC in a real browser: headless Chromium (Debian's, driven by
Playwright) calls the research desk from the page with its fake microphone playing Piper
speech; Opus both ways to the server's aiortc peer on 127.0.0.1, events and playout acks on
the data channel. Then the timeline: lanes present and ordered (the caller's request ends
before the delivery starts speaking, a delivery waited, a turn latency is shown), a
screenshot of it, and the same conversation's timeline redrawn from the store.

Set VOICEHUB_SCREENSHOT=path.png to keep the screenshot (`make screenshot` writes the one
the README shows).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_helpers import brief_research_desk, running_server
from tests.server.test_browser import CHROMIUM, caller_wav, chromium_args, require_chromium
from tests.webrtc_helpers import loopback_ice
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

pytest.importorskip("aiortc")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TIMEOUT_MS = 60_000


@pytest.fixture(autouse=True)
def loopback() -> Iterator[None]:
    with loopback_ice():
        yield


async def bars(page: Any, lane: str) -> list[dict[str, Any]]:
    """The bars of lanes whose id starts with `lane`, as drawn."""
    result: list[dict[str, Any]] = await page.eval_on_selector_all(
        f'#timeline .lane[data-lane^="{lane}"] .bar',
        """els => els.map(e => ({state: e.dataset.state, start: Number(e.dataset.start),
            end: e.dataset.end === "" ? null : Number(e.dataset.end), title: e.title,
            label: e.textContent}))""",
    )
    return result


async def test_the_console_calls_over_webrtc_and_draws_the_timeline(tmp_path: Path) -> None:
    require_chromium()
    from playwright import async_api as playwright

    expect = playwright.expect
    # the caller waits for the greeting to end (it starts a few seconds in, over WebRTC): the
    # screenshot the README shows is a call as it should go, not one cut off
    wav = caller_wav(tmp_path / "caller.wav", before=12.0)
    desks = {"research": brief_research_desk()}
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    problems: list[str] = []
    sockets: list[str] = []
    screenshot = tmp_path / "timeline.png"
    room = "research:browser-rtc"

    async with (
        running_server(settings, voice=default_voice_stacks(), desks=desks) as server,
        playwright.async_playwright() as p,
    ):
        args = [*chromium_args(wav), "--allow-loopback-in-peer-connection"]
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("console", lambda m: m.type == "error" and problems.append(m.text))
            page.on("websocket", lambda socket: sockets.append(socket.url))
            await page.goto(server.url + "/")
            await expect(page.locator("#transport")).to_have_value("webrtc")  # the default
            await page.select_option("#desk", "research")
            await page.fill("#conversation", "browser-rtc")
            await page.click("#call")
            try:
                request = page.locator(
                    "#transcript li.caller", has_text=re.compile("heat|research")
                )
                await expect(request).to_have_count(1, timeout=TIMEOUT_MS)
                tasks = page.locator("#tasks li")
                await expect(tasks.locator(".badge.ok")).to_have_count(2, timeout=TIMEOUT_MS)
                # "delivered" needs the page's playout ack, sent on the data channel
                result = page.locator("#deliveries li")
                await expect(result.locator(".badge.delivered")).to_have_count(
                    1, timeout=TIMEOUT_MS
                )
                await expect(result).to_contain_text("heat pump")
                delivered = page.locator('#timeline .lane[data-lane^="delivery:"] .bar.delivered')
                await expect(delivered).to_have_count(1, timeout=5_000)
            finally:
                await page.locator(".timeline-box").screenshot(path=screenshot)
                print(f"\n{await page.locator('main').inner_text()}\nscreenshot: {screenshot}")

            caller = await bars(page, "caller")
            agent = await bars(page, "agent")
            delivery = await bars(page, "delivery:")
            tasks_drawn = await bars(page, "task:")
            latency = await bars(page, "latency")
            print(f"caller {caller}\nagent {agent[:3]}\ndelivery {delivery}\nlatency {latency}")
            asked = next(b for b in caller if re.search("heat|research", b["title"]))
            assert [b["state"] for b in delivery] == ["waiting", "delivered"]
            waiting, spoken = delivery
            assert "heat pump" in spoken["title"]
            # the request ended before the result waited, and the result waited to speak
            assert asked["end"] is not None and asked["end"] <= waiting["start"] < spoken["start"]
            assert spoken["start"] - waiting["start"] > 2.0  # the agent's own lines came first
            assert sorted(b["state"] for b in tasks_drawn) == ["ok", "ok"]
            assert any(re.fullmatch(r"\d+\.\d\d s", b["label"]) for b in latency)
            assert len(agent) >= 3  # greeting, acknowledgement, the result
            assert agent[0]["state"] == "speaking"  # the greeting, whole

            await page.click("#hangup")
            await expect(page.locator("#status")).to_contain_text("Call ended")
            # the same conversation, drawn from the store
            await expect(page.locator(f'#past option[value="{room}"]')).to_have_count(1)
            await page.select_option("#past", room)
            await page.click("#show-past")
            await expect(page.locator("#status")).to_contain_text("from the store")
            stored = await bars(page, "delivery:")
            assert [b["state"] for b in stored] == ["waiting", "delivered"]
            assert len(await bars(page, "task:")) == 2
        finally:
            await browser.close()

        found = await server.get("/api/deliveries", params={"room": room})
        [record] = found.json()["deliveries"]
        assert (record["status"], record["attempts"]) == ("delivered", 1)

    assert sockets == []  # WebRTC carried the call: no WebSocket was opened
    assert problems == []
    if kept := os.environ.get("VOICEHUB_SCREENSHOT"):
        Path(kept).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(screenshot, kept)
