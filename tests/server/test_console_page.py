"""The console page's timeline and lists in headless Chromium, with DOM assertions: the
legend, readable latency labels, tasks and results named by their topic, tool calls at the
moment they ran, bars never thinner than their minimum and always with hover text,
interrupted speech shown as such, a past conversation as complete as the live view, and
one wording for a call's end.

The live timeline is fed a scripted sequence of call events on a controlled clock (the
real calls run in test_browser.py and test_browser_webrtc.py); the past conversation is
read from a store seeded with what a research call leaves there.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_helpers import CHANNELS, RunningServer, running_server
from tests.server.test_browser import CHROMIUM, caller_wav, chromium_args, require_chromium
from voicehub.core.events import Event, EventKind
from voicehub.core.store.base import (
    DeliveryRecord,
    DeliveryStatus,
    RoomRecord,
    TaskRecord,
    TaskStatus,
)
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub_dev.fakes.server_session import ScriptedStack

RESULT = "Here is what I found. A heat pump moves heat from the outside air into your home."

# (seconds since the call started, event) as a research call sends them
EVENTS: list[tuple[float, dict[str, Any]]] = [
    (0.1, {"type": "agent_state", "state": "speaking"}),
    (2.0, {"type": "clear"}),  # the caller talked over the greeting
    (2.0, {"type": "user_state", "state": "speaking"}),
    (2.05, {"type": "agent_state", "state": "listening"}),
    (4.0, {"type": "user_state", "state": "listening"}),
    (4.3, {"type": "transcript", "role": "user", "text": "research heat pumps", "final": True}),
    (4.31, {"type": "task_started", "task_id": "t1", "agent_id": "analyst-a"}),
    (4.32, {"type": "task_started", "task_id": "t2", "agent_id": "analyst-b"}),
    (4.33, {"type": "task_finished", "task_id": "t1", "agent_id": "analyst-a"}),
    (4.34, {"type": "task_finished", "task_id": "t2", "agent_id": "analyst-b"}),
    (4.8, {"type": "agent_state", "state": "speaking"}),
    (7.5, {"type": "tool_call", "name": "delegate_workers", "arguments": '{"task": "heat pumps"}'}),
    (8.0, {"type": "agent_state", "state": "listening"}),
    (9.0, {"type": "delivery_attempt", "delivery_id": "dlv-1", "text": RESULT}),
    (9.1, {"type": "agent_state", "state": "speaking"}),
    (14.0, {"type": "delivery", "delivery_id": "dlv-1", "outcome": "delivered", "final": True}),
]
for _, event in EVENTS:
    event.update(
        task="heat pumps" if event["type"] == "task_started" else event.get("task"),
        summary=RESULT if event["type"] == "task_finished" else event.get("summary"),
        status="ok" if event["type"] == "task_finished" else event.get("status"),
        topic="heat pumps" if event["type"] in ("delivery_attempt", "delivery") else None,
        text=event.get("text", RESULT if event["type"] == "delivery" else None),
        call_id="c1" if event["type"] == "tool_call" else None,
    )

FEED = """async ([events]) => {
  const { Timeline, LiveTimeline } = await import("/static/timeline.js");
  const timeline = new Timeline(document.getElementById("timeline"));
  const live = new LiveTimeline(timeline);
  let clock = 0;
  live.now = () => clock;
  for (const [at, event] of events) { clock = at; live.onEvent(event); }
  live.stop();
}"""

BARS = """els => els.map(e => ({lane: e.closest(".lane").dataset.lane, state: e.dataset.state,
  start: Number(e.dataset.start), width: e.getBoundingClientRect().width, title: e.title,
  label: e.textContent, overflow: getComputedStyle(e).overflow}))"""


async def open_page(p: Any, server: RunningServer, wav: Path) -> tuple[Any, Any, list[str]]:
    browser = await p.chromium.launch(executable_path=CHROMIUM, args=chromium_args(wav))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    await page.goto(server.url + "/")
    return browser, page, problems


async def lanes(page: Any) -> dict[str, str]:
    found: list[list[str]] = await page.eval_on_selector_all(
        "#timeline .lane",
        "els => els.map(e => [e.dataset.lane, e.querySelector('.lane-label').textContent])",
    )
    return dict((lane, label) for lane, label in found)


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db", prewarm=False)


@pytest.mark.slow
async def test_the_live_timeline_reads_well(tmp_path: Path, settings: ServerSettings) -> None:
    require_chromium()
    from playwright import async_api as playwright

    wav = caller_wav(tmp_path / "caller.wav", before=0.5, after=5)
    async with (
        running_server(settings, voice=ScriptedStack(), desks=load_desks(CHANNELS)) as server,
        playwright.async_playwright() as p,
    ):
        browser, page, problems = await open_page(p, server, wav)
        try:
            legend = await page.locator("#legend li").all_inner_texts()
            assert {"caller speaking", "cut off", "turn latency", "tool call"} <= set(legend)
            assert {"result waiting", "result spoken", "task running", "task done"} <= set(legend)
            await page.evaluate(FEED, [EVENTS])
            bars = await page.eval_on_selector_all("#timeline .bar", BARS)
            named = await lanes(page)
            await page.locator(".timeline-box").screenshot(path=tmp_path / "timeline.png")
        finally:
            await browser.close()
    print(bars, named, sep="\n")
    assert problems == []
    # every lane is named as docs/console.md names it
    documented = [re.compile(p) for p in documented_lanes()]
    assert all(any(p.fullmatch(label) for p in documented) for label in named.values()), named
    assert all(any(p.fullmatch(label) for label in named.values()) for p in documented)
    # tasks and the result are named by their topic, not by ids
    assert named["task:t1"] == "analyst-a: heat pumps"
    assert named["delivery:dlv-1"] == "result: heat pumps"
    # the latency label is whole and spills out of its short bar instead of being cut
    [latency] = [b for b in bars if b["lane"] == "latency"]
    assert latency["label"] == "0.80 s" and latency["overflow"] == "visible"
    # the tool call is drawn when it ran (its tasks started), not when its event came
    [tool] = [b for b in bars if b["lane"] == "tools"]
    assert tool["start"] == pytest.approx(4.31) and "delegate_workers" in tool["title"]
    # the tasks took milliseconds: still visible bars, with their text on hover
    tasks = [b for b in bars if b["lane"].startswith("task:")]
    assert [b["state"] for b in tasks] == ["ok", "ok"]
    assert all(b["width"] >= 8 and RESULT in b["title"] for b in tasks)
    assert all(b["title"] for b in bars)
    # the greeting the caller talked over is shown as cut off; later speech is whole
    agent = [b["state"] for b in bars if b["lane"] == "agent"]
    assert agent == ["interrupted", "speaking", "speaking"]
    # the result waited from the tasks' end until the caller was quiet, then was spoken
    delivery = [(b["state"], b["start"]) for b in bars if b["lane"] == "delivery:dlv-1"]
    assert delivery == [("waiting", pytest.approx(4.33)), ("delivered", pytest.approx(9.0))]


def documented_lanes() -> list[str]:
    """The lane names of docs/console.md's timeline table, as patterns (*topic*: any)."""
    page = (CHANNELS.parent / "docs" / "console.md").read_text()
    table = page.split("## The timeline", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^\| ([^|]+?) \| ", table, re.M)[1:]  # less the heading
    return [re.sub(r"\\\*[a-z]+\\\*", ".+", re.escape(name)) for name in names if name != "---"]


async def seed_past_call(server: RunningServer, room_id: str) -> None:
    store = server.switchboard.hub.store
    now = time.time() - 60
    await store.create_room(RoomRecord(id=room_id, created_at=now))

    def said(at: float, role: str, text: str, **metadata: Any) -> Event:
        return Event(
            kind=EventKind.TRANSCRIPT, text=text, role=role, room_id=room_id,
            metadata=metadata, created_at=now + at,
        )  # fmt: skip

    events = [
        said(4.0, "assistant", "Hello, you have reached the research desk.", interrupted=True),
        said(6.0, "user", "research heat pumps"),
        said(9.5, "assistant", "Sure, I'll have my analysts look into heat pumps."),
        Event(
            kind=EventKind.TOOL_CALL,
            text='{"task": "heat pumps"}',
            role="assistant",
            room_id=room_id,
            metadata={"tool": "delegate_workers"},
            created_at=now + 6.5,
        ),
    ]
    for seq, event in enumerate(sorted(events, key=lambda e: e.created_at), start=1):
        await store.append_event(event.model_copy(update={"seq": seq}))
    for number, agent in enumerate(("analyst-a", "analyst-b"), start=1):
        await store.save_task(
            TaskRecord(
                id=f"{room_id}::task-{number}", parent_room_id=room_id,
                child_room_id=f"{room_id}::task-{number}", agent_id=agent, input="heat pumps",
                status=TaskStatus.OK, output=RESULT, created_at=now + 6.5,
                finished_at=now + 6.6,
            )
        )  # fmt: skip
    await store.put_delivery(
        DeliveryRecord(
            id="dlv-past", room_id=room_id, content=RESULT, status=DeliveryStatus.DELIVERED,
            attempts=1, created_at=now + 6.6, updated_at=now + 16.0,
            metadata={"kind": "supervisor", "task": "heat pumps"},
        )
    )  # fmt: skip


@pytest.mark.slow
async def test_a_past_conversation_is_as_complete_as_the_live_view_and_calls_end_in_one_wording(
    tmp_path: Path, settings: ServerSettings
) -> None:
    require_chromium()
    from playwright import async_api as playwright

    expect = playwright.expect
    wav = caller_wav(tmp_path / "caller.wav", before=0.5, after=30)
    room = "research:past-1"
    factory = ScriptedStack()
    async with (
        running_server(settings, voice=factory, desks=load_desks(CHANNELS)) as server,
        playwright.async_playwright() as p,
    ):
        await seed_past_call(server, room)
        browser, page, problems = await open_page(p, server, wav)
        try:
            await page.select_option("#transport", "websocket")
            await page.select_option("#desk", "research")
            # a call the caller hangs up, then one the server ends: one wording each
            await page.click("#call")
            await expect(page.locator("#transcript li.agent")).to_have_count(1)  # greeting
            await page.click("#hangup")
            await expect(page.locator("#status")).to_have_text("Call ended: you hung up.")
            await page.click("#new-conversation")  # a new conversation: greeted again
            conversation = await page.input_value("#conversation")
            await page.click("#call")
            await expect(page.locator("#status")).to_contain_text(f"research:{conversation}")
            server.switchboard.calls[f"research:{conversation}"].end(1000, "call ended")
            await expect(page.locator("#status")).to_have_text("Call ended by the server.")

            await page.reload()
            await expect(page.locator(f'#past option[value="{room}"]')).to_have_count(1)
            await page.select_option("#past", room)
            await page.click("#show-past")
            await expect(page.locator("#status")).to_contain_text("from the store")
            transcript = await page.locator("#transcript li").all_inner_texts()
            tasks = await page.locator("#tasks li").all_inner_texts()
            deliveries = await page.locator("#deliveries li").all_inner_texts()
            bars = await page.eval_on_selector_all("#timeline .bar", BARS)
            named = await lanes(page)
        finally:
            await browser.close()
    assert problems == []
    assert len(transcript) == 4 and "(cut off)" in transcript[0]
    assert any(line.startswith("TOOL") and "delegate_workers" in line for line in transcript)
    assert len(tasks) == 2 and all("heat pumps" in line and "OK" in line for line in tasks)
    assert len(deliveries) == 1 and "DELIVERED" in deliveries[0] and "heat pumps" in deliveries[0]
    assert named[f"task:{room}::task-1"] == "analyst-a: heat pumps"
    assert named["delivery:dlv-past"] == "result: heat pumps"
    [latency] = [b for b in bars if b["lane"] == "latency"]
    assert "(estimated)" in latency["title"] and latency["label"].endswith(" s")
    assert next(b["state"] for b in bars if b["lane"] == "agent") == "interrupted"


STATE_LABELS = """async () => {
  const { agentState, callerState } = await import("/static/states.js");
  return [callerState("speaking"), callerState("listening"), agentState("listening"),
          agentState("thinking"), agentState("speaking")];
}"""


async def test_a_newcomers_call_reads_as_the_quickstart_says(
    tmp_path: Path, settings: ServerSettings
) -> None:
    """The page opens on the Research desk, says "connected" during the call, names the
    caller's and the agent's states in words a caller uses, gives every legend entry its
    own colour, and after the hang-up offers that call's timeline (not an older one's)."""
    require_chromium()
    from playwright import async_api as playwright

    expect = playwright.expect
    wav = caller_wav(tmp_path / "caller.wav", before=0.5, after=30)
    async with (
        running_server(settings, voice=ScriptedStack(), desks=load_desks(CHANNELS)) as server,
        playwright.async_playwright() as p,
    ):
        await seed_past_call(server, "research:older")  # what the menu showed before
        browser, page, problems = await open_page(p, server, wav)
        try:
            await expect(page.locator("#desk")).to_have_value("research")
            await expect(page.locator('#past option[value="research:older"]')).to_have_count(1)
            await page.select_option("#transport", "websocket")
            await page.click("#call")
            await expect(page.locator("#transcript li.agent")).to_have_count(1)  # greeting
            await expect(page.locator("#status")).to_contain_text(
                re.compile("^Connected to Research desk: new conversation")
            )
            labels = await page.evaluate(STATE_LABELS)
            conversation = await page.input_value("#conversation")
            await page.click("#hangup")
            await expect(page.locator("#status")).to_have_text("Call ended: you hung up.")
            await expect(page.locator("#past")).to_have_value(f"research:{conversation}")
            swatches = await page.eval_on_selector_all(
                "#legend .swatch", "els => els.map(e => getComputedStyle(e).backgroundImage"
                " + getComputedStyle(e).backgroundColor + getComputedStyle(e).borderStyle)",
            )  # fmt: skip
        finally:
            await browser.close()
    assert problems == []
    # livekit's "listening" for a silent caller reads as "quiet"; the agent's stay as they are
    assert labels == ["speaking", "quiet", "listening", "thinking", "speaking"]
    assert len(set(swatches)) == len(swatches)  # every colour of the legend tells one thing
