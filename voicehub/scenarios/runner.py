"""Playing a scenario's caller against a desk, over the WebSocket call protocol.

The caller is `voicehub call`'s client (`CallClient`): speech synthesized offline and
streamed in 20 ms frames at real-time pace, typed turns and keypad presses as protocol
messages, playout acked as a client plays it (`playout_speed` times faster). Each step
waits as a polite caller does: after a line, for the agent's answer (`wait_for_turn`); a
`barge_in` line instead starts that many seconds into the agent's next speech. The last
call waits until the conversation settles (results spoken), then hangs up.

What happened is kept per call (`CallReport`), with where each step's window starts, and
the conversation's deliveries as the server stored them (REST), for `checks`.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voicehub.client.call import CallClient, CallOptions
from voicehub.voice.events import AgentState

if TYPE_CHECKING:
    from voicehub.client.report import CallReport
    from voicehub.scenarios.model import Scenario, Step

__all__ = ["ScenarioRun", "StepWindow", "Target", "run_scenario"]

_SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Target:
    """The server a scenario calls: its base URL and access token."""

    url: str
    token: str | None = None

    def get_json(self, path: str, **query: str) -> dict[str, Any]:
        """GET a REST path (blocking: run it in a thread)."""
        url = f"{self.url.rstrip('/')}{path}?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            document: dict[str, Any] = json.loads(response.read())
        return document


@dataclass
class StepWindow:
    """A step, the call it happened on, and when (seconds since that call connected) its
    window opened; it closes when the next step on the same call starts, or the call ends."""

    index: int
    step: Step
    call: int
    start: float
    end: float = float("inf")
    wall_start: float = 0.0  # epoch seconds, to compare with the store's records


@dataclass
class ScenarioRun:
    """Everything a scenario's calls produced."""

    scenario: Scenario
    desk: str
    conversation: str
    reports: list[CallReport] = field(default_factory=list)
    windows: list[StepWindow] = field(default_factory=list)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    # the tool calls stored in the conversation's room: (epoch seconds, name, arguments)
    stored_tools: list[tuple[float, str, str]] = field(default_factory=list)
    settled: bool = True
    seconds: float = 0.0
    error: str | None = None


class _Speech:
    """Synthesized caller lines, rendered once per (text, voice)."""

    def __init__(self) -> None:
        self._rendered: dict[tuple[str, str], bytes] = {}

    async def render(self, text: str, voice: str) -> bytes:
        key = (text, voice)
        if key not in self._rendered:
            from voicehub.voice.providers.offline import synthesize

            pcm = await asyncio.to_thread(synthesize, text, voice, _SAMPLE_RATE)  # type: ignore[arg-type]
            self._rendered[key] = pcm
        return self._rendered[key]


SPEECH = _Speech()


async def run_scenario(scenario: Scenario, desk: str, target: Target) -> ScenarioRun:
    """Run `scenario` against `desk` on `target`. Never raises for what the desk does: a
    call that fails to connect or an unexpected close is kept as the run's `error`."""
    conversation = scenario.conversation or f"scenario-{uuid.uuid4().hex[:10]}"
    run = ScenarioRun(scenario, desk, conversation)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(scenario.timeout) as limit:
            await _play(run, target)
    except TimeoutError:
        run.error = (
            f"the scenario took longer than its timeout ({scenario.timeout:g} s)"
            if limit.expired()
            else f"timed out waiting for the server: {traceback.format_exc(limit=-2)}"
        )
    except Exception as exc:  # a refused call, a broken connection: reported, not raised
        run.error = f"{type(exc).__name__}: {exc}"
    room_id = f"{desk}:{conversation}"
    try:
        found = await asyncio.to_thread(target.get_json, "/api/deliveries", room=room_id)
        run.deliveries = list(found.get("deliveries", []))
        path = f"/api/rooms/{urllib.parse.quote(room_id, safe='')}/events"
        stored = await asyncio.to_thread(target.get_json, path, limit="1000")
        run.stored_tools = [
            (float(e["created_at"]), str(e["metadata"].get("tool")), str(e["text"]))
            for e in stored.get("events", [])
            if e.get("kind") == "tool_call"
        ]
    except Exception as exc:
        run.error = run.error or f"could not read the conversation from the server: {exc}"
    run.seconds = time.perf_counter() - started
    return run


async def _play(run: ScenarioRun, target: Target) -> None:
    scenario = run.scenario
    options = CallOptions(
        desk=run.desk,
        server=target.url,
        conversation=run.conversation,
        token=target.token,
        playout_speed=scenario.playout_speed,
        quiet=0.5,
    )
    for step in scenario.steps:  # synthesized before the call: a line starts on cue
        if step.say is not None:
            await SPEECH.render(step.say, step.voice)
    call: CallClient | None = await _dial(run, options)
    for index, step in enumerate(scenario.steps):
        if step.pause:
            await asyncio.sleep(step.pause)  # the caller's pause, in real time
        dialled = time.time()
        if step.call_back:
            if call is not None:
                await _hang_up(run, call)
            dialled = time.time()
            call = await _dial(run, options)
        if call is None:
            raise RuntimeError(
                f"step {index + 1} ({step.describe()}) needs a call: call back first"
            )
        if step.barge_in is not None:  # over the agent: its next speech, a moment in
            await _agent_speaking(call)
            await asyncio.sleep(step.barge_in)
        # a call-back's window opens with the call: a held result may be its first words
        window = StepWindow(
            index,
            step,
            len(run.reports) - 1,
            0.0 if step.call_back else call.now(),
            wall_start=dialled if step.call_back else time.time(),
        )
        _close_windows(run, window.call, window.start)
        run.windows.append(window)
        if step.call_back:
            continue
        if step.hang_up:
            await _hang_up(run, call)
            call = None
        elif step.silence is not None:
            await asyncio.sleep(step.silence)  # the open microphone sends silence meanwhile
        else:
            await _speak(call, step, window)
    if call is not None:
        run.settled = await call.settle(scenario.timeout)
        await _hang_up(run, call)


async def _dial(run: ScenarioRun, options: CallOptions) -> CallClient:
    call = CallClient(options)
    await call.connect()
    run.reports.append(call.report)
    await call.wait_for_turn(through_thinking=True)  # the greeting, if any
    return call


async def _hang_up(run: ScenarioRun, call: CallClient) -> None:
    await call.hangup()
    await call.close()
    _close_windows(run, len(run.reports) - 1, call.now())


def _close_windows(run: ScenarioRun, call: int, at: float) -> None:
    for window in run.windows:
        if window.call == call and window.end == float("inf"):
            window.end = at


async def _speak(call: CallClient, step: Step, window: StepWindow) -> None:
    if step.say is not None:
        await call.say(await SPEECH.render(step.say, step.voice), step.say)
    elif step.text is not None:
        await call.type_text(step.text)
    elif step.keypad is not None:
        await call.press_keys(step.keypad)
    if step.wait:
        await call.wait_for_turn(through_thinking=True)


async def _agent_speaking(call: CallClient) -> None:
    """Until the agent speaks (already, or next)."""

    def speaking() -> bool:
        states = call.report.events_of(AgentState)
        return bool(states) and states[-1].state == "speaking"

    await call.wait_for(speaking, timeout=60.0)
