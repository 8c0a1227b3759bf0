"""The console page in a real browser: headless Chromium, driven by Playwright, opens `/`
and calls the research desk with a microphone fed from a WAV file of Piper speech. The page's
own code does everything a caller's browser does: the AudioWorklet captures and sends 16 kHz
PCM16 frames, the agent's audio plays on the page's AudioContext (in real time), each speech
mark is acked once played, and the transcript, tasks and deliveries panes fill in.

Chromium's fake microphone plays its file from the moment the page opens the microphone, in
a loop: the WAV is a silence that lets the agent finish its greeting (a caller barging into it
works too, but makes the run depend on timing), the request, and a silence longer than the
test, so the caller asks exactly once. Needs Debian's chromium at /usr/bin/chromium
(`make test` installs it when it can; without it the test fails with the command that
installs it) and the `playwright` package (the `dev` extra; its bundled browsers are never
downloaded or used).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_helpers import brief_research_desk, running_server
from tests.support.speech import spoken
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.voice.audio import write_wav

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CHROMIUM = "/usr/bin/chromium"
CHANNELS = Path(__file__).resolve().parents[2] / "channels"
RESEARCH = "could you research heat pumps for me please"
RATE = 16000
# Generous: greeting, request, answer and the result, all played in real time.
TIMEOUT_MS = 60_000


def require_chromium() -> None:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"this test needs Debian's chromium at {CHROMIUM}: run `make test` as root, or "
            "`apt-get update && apt-get install -y chromium`"
        )


def caller_wav(path: Path, *, before: float = 6.0, after: float = 120.0) -> Path:
    """The caller's request between silences: the greeting (about 4 s) starts within a second
    of the Call button; the trailing silence outlasts the test."""
    speech = spoken(RESEARCH, rate=RATE)
    write_wav(path, bytes(2 * int(RATE * before)) + speech + bytes(2 * int(RATE * after)), RATE)
    return path


def chromium_args(wav: Path) -> list[str]:
    # Playwright adds --headless and a fresh --user-data-dir itself.
    return [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--autoplay-policy=no-user-gesture-required",
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}",
    ]


class FrameLog:
    """The JSON messages of the page's call WebSocket, both ways, with their arrival times."""

    def __init__(self) -> None:
        self.start = time.monotonic()  # reset when the test presses Call
        self.messages: list[tuple[float, str, dict[str, Any]]] = []
        self.audio_frames_sent = 0

    def attach(self, socket: Any) -> None:
        socket.on("framesent", lambda payload: self._add("page", payload))
        socket.on("framereceived", lambda payload: self._add("server", payload))

    def _add(self, sender: str, payload: str | bytes) -> None:
        if isinstance(payload, str):
            self.messages.append((time.monotonic() - self.start, sender, json.loads(payload)))
        elif sender == "page":
            self.audio_frames_sent += 1

    def of(self, sender: str, kind: str) -> list[dict[str, Any]]:
        return [m for _, s, m in self.messages if s == sender and m["type"] == kind]

    def timeline(self) -> str:
        lines = []
        for at, sender, message in self.messages:
            if message["type"] not in ("user_state", "agent_state"):
                lines.append(f"{at:6.2f}  {sender:6}  {json.dumps(message)[:110]}")
        return "\n".join(lines)


async def test_the_console_calls_the_research_desk_with_the_microphone(tmp_path: Path) -> None:
    require_chromium()
    from playwright import async_api as playwright

    expect = playwright.expect
    wav = caller_wav(tmp_path / "caller.wav")
    desks = {"research": brief_research_desk()}
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    factory = default_voice_stacks()
    frames = FrameLog()
    problems: list[str] = []
    screenshot = tmp_path / "console.png"

    async with (
        running_server(settings, voice=factory, desks=desks) as server,
        playwright.async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=chromium_args(wav))
        try:
            page = await browser.new_page()
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("console", lambda m: m.type == "error" and problems.append(m.text))
            page.on(
                "response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}")
            )
            page.on("websocket", frames.attach)
            await page.goto(server.url + "/")
            await page.select_option("#desk", "research")
            await page.select_option("#transport", "websocket")  # WebRTC is the default
            await page.fill("#conversation", "browser-e2e")
            frames.start = time.monotonic()
            await page.click("#call")
            try:
                # asked once: the looped file's long silence never asks again
                request = page.locator(
                    "#transcript li.caller", has_text=re.compile("heat|research")
                )
                await expect(request).to_have_count(1, timeout=TIMEOUT_MS)
                tasks = page.locator("#tasks li")
                await expect(tasks.filter(has_text="analyst-a")).to_have_count(1, timeout=10_000)
                await expect(tasks.filter(has_text="analyst-b")).to_have_count(1)
                await expect(tasks.locator(".badge.ok")).to_have_count(2, timeout=TIMEOUT_MS)
                await expect(tasks).to_have_count(2)
                # "delivered" needs the page's playout ack of the result's last speech mark
                result = page.locator("#deliveries li")
                await expect(result.locator(".badge.delivered")).to_have_count(
                    1, timeout=TIMEOUT_MS
                )
                await expect(result).to_have_count(1)
                await expect(result).to_contain_text("heat pump")
            finally:
                await page.screenshot(path=screenshot, full_page=True)
                print(f"\n{frames.timeline()}\n\n{await page.locator('main').inner_text()}")
                print(f"\nscreenshot: {screenshot}")
            await page.click("#hangup")
            await expect(page.locator("#status")).to_contain_text("Call ended")
        finally:
            await browser.close()

        room = "research:browser-e2e"
        found = await server.get("/api/deliveries", params={"room": room})
        [delivery] = found.json()["deliveries"]
        assert (delivery["status"], delivery["attempts"]) == ("delivered", 1)

    assert problems == []
    assert frames.audio_frames_sent > 100  # the worklet streamed the microphone
    # every ack answers a speech mark, once, in the order the marks came
    marks = [m["id"] for m in frames.of("server", "speech_mark")]
    acks = [m["id"] for m in frames.of("page", "playout")]
    assert acks and acks == [mark for mark in marks if mark in acks]
    [started] = frames.of("server", "session")
    assert started["room_id"] == room
    assert [e["status"] for e in frames.of("server", "task_finished")] == ["ok", "ok"]
