"""End to end on a realtime desk: the real server (uvicorn on 127.0.0.1), its WebSocket
transport, the `research-realtime` desk pointed at the fake Realtime server through
`[voice.realtime] base_url`, and a WebSocket caller (`voicehub.client.call`) speaking Piper
speech in real time. The fake hears the caller with its energy VAD and PocketSphinx, and
speaks Piper audio; the analysts run on the scripted LLM in child rooms, as served.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.e2e_helpers import RunningServer, running_server
from tests.server.test_e2e import (
    HEAT_PUMP_WORDS,
    RESEARCH,
    check_result_waited_for_idle,
    heard_keywords,
    recognized,
    result_segments,
)
from tests.support.speech import spoken
from tests.webrtc_helpers import loopback_ice
from voicehub.client.call import CallClient, CallOptions
from voicehub.client.report import format_summary, format_timeline
from voicehub.desks.desk import load_desks
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.voice.events import (
    ClearAudio,
    DeliveryAttempt,
    DeliveryOutcome,
    ProviderError,
    TaskFinished,
    TaskStarted,
    ToolCall,
    Transcript,
)
from voicehub.voice.realtime.recap import RECAP_HEADER
from voicehub.voice.realtime_session import SAY_INSTRUCTIONS
from voicehub_dev.fakes.openai_realtime import Call, FakeRealtimeServer, Say, Turn

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
DESK = "research-realtime"
STORY = (
    "Here is the weather for the week. It will be sunny in Paris, cloudy in London, rainy "
    "in Berlin, and windy in Dublin, with cooler evenings everywhere."
)


class Model:
    """The fake model's brain: research goes to delegate_workers; other turns get the next
    line of `replies` (then "Okay.")."""

    def __init__(self) -> None:
        self.replies: list[str] = []

    def __call__(self, turn: Turn) -> list[Say | Call]:
        said = SAY_INSTRUCTIONS.split("{text}")[0]
        if turn.instructions.startswith(said):
            return [Say(turn.instructions[len(said) :])]
        last = turn.last
        if last.get("type") == "function_call_output":
            return [Say("My analysts are on it.")]
        text = turn.last_text()
        if last.get("role") == "user" and ("research" in text or "pump" in text):
            return [Say("Sure."), Call("delegate_workers", {"task": "heat pumps"})]
        return [Say(self.replies.pop(0) if self.replies else "Okay.")]


@pytest.fixture
async def model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[FakeRealtimeServer, Model, RunningServer]]:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    brain = Model()
    async with FakeRealtimeServer(brain) as fake:
        channels = tmp_path / "channels"
        shutil.copytree(CHANNELS / "knowledge", channels / "knowledge")
        text = (CHANNELS / f"{DESK}.toml").read_text()
        text = text.replace(
            "[voice.realtime]\n", f'[voice.realtime]\nbase_url = "{fake.base_url}"\n'
        )
        (channels / f"{DESK}.toml").write_text(text)
        desks = {DESK: load_desks(channels)[DESK]}
        settings = ServerSettings(channels_dir=channels, db_path=tmp_path / "voicehub.db")
        async with running_server(settings, voice=default_voice_stacks(), desks=desks) as server:
            yield fake, brain, server


def holding(fake: FakeRealtimeServer, deltas: int) -> bool:
    """The running response has sent `deltas` audio deltas (and waits on `fake.hold`)."""
    active = fake.sessions[-1].active
    if active is None:
        return False
    sent = [e for e in fake.sent if e["type"] == "response.output_audio.delta"]
    return sum(e["response_id"] == active.id for e in sent) >= deltas


def caller(server: RunningServer, conversation: str, *, webrtc: bool = False) -> CallClient:
    options = CallOptions(
        desk=DESK,
        server=server.url,
        conversation=conversation,
        webrtc=webrtc,
        playout_speed=16.0,
        quiet=0.5,
    )
    return CallClient(options)


async def ask_for_research(call: CallClient) -> DeliveryOutcome:
    """Say the research request; the result's delivery, once the call has settled."""
    await call.say(spoken(RESEARCH), RESEARCH)
    delivered = await call.wait_for_event(
        DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=60
    )
    assert await call.settle(30)
    return delivered


async def test_research_is_delegated_and_the_result_spoken_once_everyone_is_idle(
    model: tuple[FakeRealtimeServer, Model, RunningServer],
) -> None:
    fake, _, server = model
    async with caller(server, "rt-research") as call:
        await call.wait_for_turn()  # the greeting, spoken by the model
        delivered = await ask_for_research(call)
    report = call.report
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")

    [tool] = report.events_of(ToolCall)
    assert tool.name == "delegate_workers" and json.loads(tool.arguments) == {"task": "heat pumps"}
    [output] = [
        e["item"]
        for e in fake.of_type("conversation.item.create")
        if e["item"]["type"] == "function_call_output"
    ]
    assert output["call_id"] == tool.call_id and "task" in output["output"]
    assert sorted(str(e.agent_id) for e in report.events_of(TaskStarted)) == [
        "analyst-a",
        "analyst-b",
    ]
    assert [e.status for e in report.events_of(TaskFinished)] == ["ok", "ok"]
    assert [e.outcome for e in report.events_of(DeliveryOutcome)] == ["delivered"]
    assert ("assistant", "My analysts are on it.") in [
        (e.role, e.text) for e in report.events_of(Transcript) if e.final
    ]
    segments = result_segments(report, str(delivered.delivery_id))
    check_result_waited_for_idle(report, segments)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=3)


async def test_a_webrtc_call_runs_at_the_models_rate_and_is_heard_both_ways(
    model: tuple[FakeRealtimeServer, Model, RunningServer],
) -> None:
    pytest.importorskip("aiortc")
    _, _, server = model
    with loopback_ice():
        async with caller(server, "rt-webrtc", webrtc=True) as call:
            await call.wait_for_turn()  # the greeting, spoken by the model over Opus
            live = server.switchboard.calls[f"{DESK}:rt-webrtc"]
            # Opus' 48 kHz converted once to the model's rate: the relay passes it through
            assert (live.kind, live.transport.sample_rate) == ("webrtc", 24000)
            delivered = await ask_for_research(call)
    report = call.report
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")
    # the fake model heard the request in the caller's audio, and the caller heard the result
    [tool] = report.events_of(ToolCall)
    assert tool.name == "delegate_workers" and json.loads(tool.arguments) == {"task": "heat pumps"}
    segments = result_segments(report, str(delivered.delivery_id))
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=3)


async def test_barge_in_truncates_and_a_dropped_model_connection_keeps_the_result(
    model: tuple[FakeRealtimeServer, Model, RunningServer],
) -> None:
    fake, brain, server = model
    async with caller(server, "rt-faults") as call:
        await call.wait_for_turn()

        # 1. a barge-in: the model's long answer is held after 500 ms of audio
        fake.hold, fake.hold_after, fake.hold_text = asyncio.Event(), 5, "weather"
        brain.replies = [STORY]
        await call.say(spoken("hello there"), "hello there")
        await fake.wait_for(lambda: holding(fake, 5))
        active = fake.sessions[-1].active
        assert active is not None
        [story] = [
            e["item_id"]
            for e in fake.sent
            if e["type"] == "response.output_item.added" and e["response_id"] == active.id
        ]

        def heard_marks() -> list[int]:  # progress marks of the story the caller acked
            return [
                int(str(s.mark_id).split("@")[1])
                for s in call.report.segments
                if str(s.mark_id).startswith(f"{story}@") and s.acked_at is not None
            ]

        # every mark of the 500 ms sent (200, 400) played: nothing more moves until the cut
        await call.wait_for(lambda: max(heard_marks(), default=0) >= 400)
        await call.say(spoken("stop stop please"), "barge in")
        await fake.wait_for(lambda: bool(fake.of_type("conversation.item.truncate")))
        fake.hold.set()
        [truncate] = fake.of_type("conversation.item.truncate")
        assert truncate["item_id"] == story
        heard = max(heard_marks())
        assert truncate["audio_end_ms"] == heard == 400  # what the caller's speaker played
        assert call.report.events_of(ClearAudio)
        await call.wait_for_turn()

        # 2. research; the result's speech is held, and the model connection drops under it
        fake.hold, fake.hold_after, fake.hold_text = asyncio.Event(), 2, "found"
        await call.say(spoken(RESEARCH), RESEARCH)
        await call.wait_for(lambda: len(call.report.events_of(DeliveryAttempt)) == 1, 60)
        await fake.wait_for(lambda: holding(fake, 2))
        await fake.drop()
        fake.hold.set()  # the new connection speaks freely
        delivered = await call.wait_for_event(
            DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=60
        )
        assert await call.settle(30)
    report = call.report
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")

    assert [e.outcome for e in report.events_of(DeliveryOutcome)] == ["interrupted", "delivered"]
    assert len(fake.sessions) == 2
    assert any(e.message.startswith("model_disconnected") for e in report.events_of(ProviderError))
    restored = fake.of_type("session.update")[-1]["session"]["instructions"]
    assert RECAP_HEADER in restored and "My analysts are on it." in restored
    told = [e.text for e in report.events_of(Transcript) if e.final and e.role == "assistant"]
    results = [text for text in told if "found" in text]
    assert len(results) == 1, told  # spoken once, in full
    # the delivered attempt's audio: from its attempt to its outcome
    final = next(r.at for r in report.events if r.event is delivered)
    start = max(r.at for r in report.events if isinstance(r.event, DeliveryAttempt))
    segments = [s for s in report.segments if start <= s.first_audio_at <= final]
    assert segments and not any(s.cut for s in segments)
    check_result_waited_for_idle(report, segments)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=3)
