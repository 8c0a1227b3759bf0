"""Recordings through the real server (uvicorn, WebSocket calls, a scripted session that
speaks a tone): a desk with `[record]` gets a stereo WAV and a JSON transcript per call,
the caller on the left and the agent (greeting, answer, a delivered result) on the right;
a call-back joins its conversation; the REST view serves them with the token and deletes
them; a desk without `[record]` keeps nothing."""

from __future__ import annotations

import asyncio
import io
import json
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from voicehub.delivery.injector import InjectOutcome
from voicehub.desks.desk import Desk, build_desk, load_desks
from voicehub.desks.voice_stack import CallSpec
from voicehub.recordings.folder import RecordingFolder
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
TOKEN = "a-long-enough-test-token"
RATE = 16000
AGENT_LEVEL, CALLER_LEVEL = 2000, 8000


class ToneSession(ScriptedSession):
    """Says each line as 0.3 s of a constant level, so the agent's channel is seen."""

    async def say(self, text: str, *, allow_interrupt: bool = True) -> InjectOutcome:
        await self.transport.send_audio(np.full(int(0.3 * RATE), AGENT_LEVEL, "<i2").tobytes())
        return await super().say(text, allow_interrupt=allow_interrupt)


class ToneFactory(ScriptedStack):
    async def start(self, call: CallSpec) -> ScriptedSession:
        hub, desk, room_id = call.hub, call.desk, call.room_id
        await hub.create_room(room_id, orchestration=desk.call_orchestration())
        session = ToneSession(hub, room_id, desk, call.transport, call.greeting, "I see.")
        self.sessions.append(session)
        await session.start()
        return session


def with_record(desk: Desk, **record: Any) -> Desk:
    config = desk.config.model_copy(update={"record": desk.config.record.model_copy(update=record)})
    return build_desk(config, base_dir=CHANNELS)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    examples = load_desks(CHANNELS)
    desks = {
        "research": with_record(examples["research"], audio=True, transcript=True),
        "drafting": examples["drafting"],
    }
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db", token=TOKEN)
    async with running_server(settings, voice=ToneFactory(), desks=desks) as running:
        yield running


async def play_out(ws: ClientConnection, until: str | None = None) -> list[dict[str, Any]]:
    """Receive, acking every speech mark, until an event of type `until` (or silence)."""
    seen: list[dict[str, Any]] = []
    while True:
        try:
            message = await asyncio.wait_for(ws.recv(), 1.0 if until is None else 10.0)
        except TimeoutError:
            return seen
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
    await server.app.state.parts.recordings.aclose()  # the files are written


@pytest.mark.slow
async def test_a_recorded_call_and_its_call_back(server: RunningServer) -> None:
    url = f"{server.ws_url}/desks/research/call?conversation=rec&token={TOKEN}"
    async with connect(url) as ws:
        await play_out(ws, until="speech_mark")  # the greeting
        await play_out(ws)
        # the caller speaks 0.4 s, paced as a microphone sends it, then silence: the
        # session answers
        words = np.full(int(0.4 * RATE), CALLER_LEVEL, "<i2").tobytes()
        for start in range(0, len(words), 640):
            await ws.send(words[start : start + 640])
            await asyncio.sleep(0.02)
        await ws.send(bytes(640 * 25))
        await play_out(ws, until="speech_mark")
        # a result finished meanwhile is spoken into the call
        await server.switchboard.hub.deliver("research:rec", "Here is what I found.")
        await play_out(ws, until="delivery")
        await hang_up(server, ws, "research:rec")
    async with connect(url) as ws:  # the call-back: no greeting, a recording of its own
        await ws.send(bytes(640 * 10))
        await play_out(ws)
        await hang_up(server, ws, "research:rec")

    api = "/api/rooms/research%3Arec/recordings"
    on_disk = server.app.state.parts.recordings.folder.folder("research:rec").iterdir()
    assert all(path.name.endswith(".sealed") for path in on_disk)  # nothing in the clear
    assert (await server.get(api)).status_code == 401
    listed = (await server.get(api, params={"token": TOKEN})).json()["recordings"]
    assert len(listed) == 2
    first = listed[0]
    wav = await server.get(first["audio_url"], headers={"Authorization": f"Bearer {TOKEN}"})
    assert wav.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(wav.content), "rb") as audio:
        assert (audio.getnchannels(), audio.getframerate()) == (2, RATE)
        stereo = np.frombuffer(audio.readframes(audio.getnframes()), "<i2").reshape(-1, 2)
    caller, agent = stereo[:, 0], stereo[:, 1]
    caller_at = np.flatnonzero(caller == CALLER_LEVEL)
    agent_at = np.flatnonzero(agent == AGENT_LEVEL)
    assert caller_at.size == int(0.4 * RATE)  # all of the caller's words, on the left only
    assert not np.any(agent == CALLER_LEVEL) and not np.any(caller == AGENT_LEVEL)
    # the agent: greeting, answer and result, 0.3 s each; the answer after the words
    runs = np.split(agent_at, np.flatnonzero(np.diff(agent_at) > 1) + 1)
    assert [len(run) for run in runs] == [int(0.3 * RATE)] * 3
    assert runs[0][-1] < caller_at[0] < caller_at[-1] < runs[1][0] < runs[2][0]

    document = (await server.get(first["transcript_url"], params={"token": TOKEN})).json()
    assert document["room_id"] == "research:rec" and document["conversation"] == "rec"
    kinds = [(e["kind"], e.get("role"), e.get("outcome")) for e in document["entries"]]
    assert ("speech", "assistant", None) in kinds
    assert ("delivery", None, "delivered") in kinds
    said = [e["text"] for e in document["entries"] if e["kind"] == "speech"]
    assert said[0].startswith("Hello, you have reached the research desk")
    assert "I see." in said and "Here is what I found." in said
    times = [e["at"] for e in document["entries"]]
    assert times == sorted(times) and 0 < times[-1] <= document["seconds"]

    missing = await server.get(f"{api}/20990101T000000-1.wav", params={"token": TOKEN})
    assert missing.status_code == 404
    async with httpx.AsyncClient(base_url=server.url) as client:
        deleted = await client.delete(api, headers={"Authorization": f"Bearer {TOKEN}"})
    assert deleted.json() == {"room_id": "research:rec", "deleted_files": 4}
    assert (await server.get(api, params={"token": TOKEN})).json()["recordings"] == []


async def test_the_rest_view_opens_sealed_files_by_range_and_names_a_wrong_key(
    server: RunningServer,
) -> None:
    folder = server.app.state.parts.recordings.folder
    stereo = np.repeat(np.frombuffer(spoken("hello there"), "<i2"), 2).tobytes()
    stem = folder.save(
        "research:seek", 1_700_000_000.0, stereo=stereo, sample_rate=RATE, transcript=None
    )
    url = f"/api/rooms/research%3Aseek/recordings/{stem}.wav"
    whole = await server.get(url, params={"token": TOKEN})
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    assert whole.content == folder.read("research:seek", f"{stem}.wav")
    assert whole.content[:4] == b"RIFF" and whole.content.endswith(stereo)
    size = len(whole.content)
    for asked, first, last in (("bytes=100-199", 100, 199), ("bytes=-10", size - 10, size - 1),
                               (f"bytes={size - 5}-", size - 5, size - 1)):  # fmt: skip
        part = await server.get(url, params={"token": TOKEN}, headers={"Range": asked})
        assert part.status_code == 206, asked
        assert part.headers["content-range"] == f"bytes {first}-{last}/{size}"
        assert part.content == whole.content[first : last + 1]
    # a file another server sealed (another number secret) is an error naming it
    RecordingFolder(folder.root, b"another server's secret, 32 long").save(
        "research:elsewhere", 1_700_000_000.0, stereo=None, sample_rate=RATE, transcript="{}"
    )
    api = "/api/rooms/research%3Aelsewhere/recordings"
    [listed] = (await server.get(api, params={"token": TOKEN})).json()["recordings"]
    failed = await server.get(listed["transcript_url"], params={"token": TOKEN})
    assert failed.status_code == 500 and failed.json()["error"] == "recording_sealed"
    assert "'20231114T221320-1.json' of room 'research:elsewhere'" in failed.json()["message"]
    assert "number secret" in failed.json()["message"]


async def test_a_desk_without_record_keeps_nothing(server: RunningServer) -> None:
    url = f"{server.ws_url}/desks/drafting/call?conversation=plain&token={TOKEN}"
    async with connect(url) as ws:
        await play_out(ws, until="speech_mark")
        await hang_up(server, ws, "drafting:plain")
    listed = await server.get("/api/rooms/drafting%3Aplain/recordings", params={"token": TOKEN})
    assert listed.json()["recordings"] == []
    assert not server.app.state.parts.recordings.folder.root.exists()


@pytest.mark.slow
async def test_the_console_plays_a_past_conversation_along_its_timeline(
    server: RunningServer,
) -> None:
    from playwright.async_api import async_playwright, expect

    from tests.server.test_browser import CHROMIUM, require_chromium

    require_chromium()
    url = f"{server.ws_url}/desks/research/call?conversation=replay&token={TOKEN}"
    async with connect(url) as ws:
        await play_out(ws, until="speech_mark")
        await hang_up(server, ws, "research:replay")
    problems: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"],
        )
        try:
            page = await browser.new_page()
            page.on("pageerror", lambda error: problems.append(str(error)))
            await page.goto(f"{server.url}/?token={TOKEN}")
            await page.select_option("#past", "research:replay")
            await page.click("#show-past")
            player = page.locator("#recordings audio")
            await expect(player).to_have_count(1)
            src = await player.get_attribute("src")
            assert src is not None and src.endswith(f".wav?token={TOKEN}")
            # the recording loads, and seeking moves the playhead over the timeline
            await page.evaluate(
                """async () => {
                    const audio = document.querySelector("#recordings audio");
                    audio.preload = "auto"; audio.load();
                    await new Promise((ok) => audio.addEventListener("loadedmetadata", ok));
                    audio.currentTime = 0.2;
                }"""
            )
            head = page.locator("#timeline .playhead")
            await expect(head).to_have_count(1)
            assert (
                float((await head.get_attribute("style") or "").split("left:")[1].split("px")[0])
                > 0
            )
        finally:
            await browser.close()
    assert not problems
