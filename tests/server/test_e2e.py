"""End to end on the embedded stack: real uvicorn on 127.0.0.1, the real `websockets`
client (`voicehub.client.call`), caller speech synthesized by Piper and streamed in real
time, Silero VAD and PocketSphinx on the server, the desks of `channels/`, Piper for the
agent, and the agent's audio recognized back with PocketSphinx.

The client plays the agent's audio on a virtual speaker 16x faster than real time (acks come
in the order and at the moments a browser's would, just sooner); the caller's audio is
paced in real time because "no result while the caller is talking" is about timing.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from voicehub import cli
from voicehub.client.call import CallClient, CallOptions, place_call
from voicehub.client.report import AgentSegment, CallReport, format_summary, format_timeline
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import VoiceStacks, default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.voice.audio import read_wav
from voicehub.voice.events import (
    CallSession,
    DeliveryAttempt,
    DeliveryOutcome,
    TaskFinished,
    TaskStarted,
    ToolCall,
    Transcript,
)
from voicehub.voice.providers.offline import transcribe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
RESEARCH = "could you research heat pumps for me please"
HEAT_PUMP_WORDS = ("heat", "pump", "electricity", "three", "units", "home")


@pytest.fixture(scope="module")
def factory() -> VoiceStacks:
    return default_voice_stacks()  # models load once for every server of the module


@pytest.fixture(scope="module")
def speech() -> dict[str, bytes]:
    lines = [
        RESEARCH,
        "please write a short note about electric cars",
        "thank you, and while they work, let me tell you about my old house, "
        "it gets very cold in the winter",
    ]
    return {line: spoken(line) for line in lines}


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    # The example desks these flows are about (`channels/` may hold more).
    examples = load_desks(CHANNELS)
    return {name: examples[name] for name in ("drafting", "research")}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory,
    factory: VoiceStacks,
    desks: dict[str, Desk],
) -> AsyncIterator[RunningServer]:
    db = tmp_path_factory.mktemp("e2e") / "voicehub.db"
    settings = ServerSettings(channels_dir=CHANNELS, db_path=db)
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


def options(server: RunningServer, desk: str, conversation: str, **extra: Any) -> CallOptions:
    return CallOptions(
        desk=desk,
        server=server.url,
        conversation=conversation,
        playout_speed=16.0,
        quiet=0.5,
        **extra,
    )


def result_segments(report: CallReport, delivery_id: str) -> list[AgentSegment]:
    """The agent audio of one delivery: between its last attempt and its outcome (events and
    audio share one ordered queue on the server, so the attempt precedes the audio; over
    WebRTC the client's link holds each mark, and what follows it, until its audio arrived)."""
    outcome = next(
        r
        for r in report.events
        if isinstance(r.event, DeliveryOutcome) and r.event.delivery_id == delivery_id
    )
    attempts = [
        r.at
        for r in report.events
        if isinstance(r.event, DeliveryAttempt)
        and r.event.delivery_id == delivery_id
        and r.at <= outcome.at
    ]
    return [s for s in report.segments if attempts[-1] <= s.first_audio_at <= outcome.at]


async def recognized(report: CallReport, segments: list[AgentSegment]) -> str:
    """What PocketSphinx hears in the first 12 s of `segments` (enough for the keywords)."""
    audio = b"".join(report.segment_audio(segment) for segment in segments)
    return await asyncio.to_thread(transcribe, audio[: 12 * 32000], 16000)


def check_result_waited_for_idle(report: CallReport, segments: list[AgentSegment]) -> None:
    """No result audio while caller audio was arriving, and not before the agent's previous
    speech was played out plus the 1 s WaitForIdle buffer."""
    assert segments, "no agent audio for the result"
    first = segments[0].first_audio_at
    for utterance in report.utterances:
        assert utterance.started_at is not None and utterance.ended_at is not None
        assert not utterance.started_at <= first <= utterance.ended_at
        assert first > utterance.ended_at
    earlier_acks = [s.acked_at for s in report.segments if s.acked_at and s.acked_at < first]
    attempt = max(
        r.at for r in report.events if isinstance(r.event, DeliveryAttempt) and r.at < first
    )
    assert attempt - max(earlier_acks) >= 0.95, "the result did not wait for 1 s of idle"


def heard_keywords(text: str, words: tuple[str, ...], at_least: int) -> None:
    found = [word for word in words if word in text]
    assert len(found) >= at_least, f"heard {text!r}; found only {found}"


# -- the flows the issue asks for -------------------------------------------------------------


async def test_research_is_delegated_and_the_result_spoken_once_everyone_is_idle(
    server: RunningServer, speech: dict[str, bytes]
) -> None:
    report = await place_call(
        options(server, "research", "e2e-research"), [(RESEARCH, speech[RESEARCH])]
    )
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")
    assert report.settled

    [heard] = [e.text for e in report.events_of(Transcript) if e.role == "user"][-1:]
    assert "research" in heard and ("heat" in heard or "pump" in heard)
    [tool] = report.events_of(ToolCall)
    assert tool.name == "delegate_workers" and "pump" in json.loads(tool.arguments)["task"]
    started = report.events_of(TaskStarted)
    assert sorted((str(e.agent_id), str(e.child_room_id)) for e in started) == [
        ("analyst-a", "research:e2e-research::task-1"),
        ("analyst-b", "research:e2e-research::task-2"),
    ]
    assert [e.status for e in report.events_of(TaskFinished)] == ["ok", "ok"]
    [delivery] = report.events_of(DeliveryOutcome)
    assert (delivery.outcome, delivery.strategy) == ("delivered", "wait_for_idle")

    segments = result_segments(report, str(delivery.delivery_id))
    check_result_waited_for_idle(report, segments)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=4)
    children = (await server.get("/api/rooms", params={"parent": report.room_id})).json()
    assert [room["status"] for room in children["rooms"]] == ["closed", "closed"]
    assert all(0 < latency < 5 for latency in report.latencies())


async def test_a_request_with_a_pause_inside_it_reaches_its_tool_once(
    server: RunningServer,
) -> None:
    # "could you research ... heat pumps for me please": 0.8 s of silence mid-request, as a
    # caller looking for the words; VAD silence alone would end the turn at "research"
    pause = bytes(2 * int(0.8 * 16000))
    pcm = spoken("could you research") + pause + spoken("heat pumps for me please")
    line = "could you research ... heat pumps for me please"
    report = await place_call(options(server, "research", "e2e-pause"), [(line, pcm)])
    print(f"\n{format_timeline(report)}")
    assert report.settled
    [tool] = report.events_of(ToolCall)  # one request, its tool called once
    assert tool.name == "delegate_workers" and "pump" in json.loads(tool.arguments)["task"]
    asks = [e.text for e in report.events_of(Transcript) if "what should" in e.text.lower()]
    assert not asks  # the half request was never answered on its own


async def test_a_draft_goes_through_the_review_loop_and_is_read_back(
    server: RunningServer, speech: dict[str, bytes]
) -> None:
    line = "please write a short note about electric cars"
    report = await place_call(options(server, "drafting", "e2e-drafting"), [(line, speech[line])])
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")
    assert report.settled

    heard = [e.text for e in report.events_of(Transcript) if e.role == "user"][-1]
    assert "note" in heard and "electric" in heard
    [tool] = report.events_of(ToolCall)
    assert tool.name == "delegate_loop" and "electric" in json.loads(tool.arguments)["task"]
    agents = [e.agent_id for e in report.events_of(TaskStarted)]
    assert agents == ["writer", "editor", "fact-checker"] * 2  # one revision, then approved
    [delivery] = report.events_of(DeliveryOutcome)
    assert delivery.outcome == "delivered" and delivery.kind == "loop"
    assert delivery.text.startswith("Electric cars run on a battery")  # no marker spoken

    segments = result_segments(report, str(delivery.delivery_id))
    check_result_waited_for_idle(report, segments)
    words = ("electric", "battery", "petrol", "charge", "miles", "home")
    heard_keywords(await recognized(report, segments), words, at_least=4)


async def test_a_caller_who_keeps_talking_is_not_talked_over(
    server: RunningServer, speech: dict[str, bytes]
) -> None:
    chatter = next(line for line in speech if line.startswith("thank you"))
    report = await place_call(
        # an eager caller: talks again as soon as the agent's answer has played
        options(server, "research", "e2e-chatter", turn_pause=0.0),
        [(RESEARCH, speech[RESEARCH]), (chatter, speech[chatter])],
    )
    print(f"\n{format_timeline(report)}\n{format_summary(report)}")
    assert report.settled
    _, chatting = report.utterances
    finished = [r.at for r in report.events if isinstance(r.event, TaskFinished)]
    assert chatting.started_at is not None and chatting.ended_at is not None
    # the result was ready before the caller started talking again...
    assert len(finished) == 2 and max(finished) < chatting.started_at
    # ...and waited: nothing was attempted, cut or spoken until the caller had finished
    [delivery] = report.events_of(DeliveryOutcome)
    assert delivery.outcome == "delivered" and delivery.attempt == 1
    attempts = [r.at for r in report.events if isinstance(r.event, DeliveryAttempt)]
    assert min(attempts) > chatting.ended_at
    segments = result_segments(report, str(delivery.delivery_id))
    check_result_waited_for_idle(report, segments)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=4)


async def test_a_caller_who_hung_up_hears_the_result_after_calling_back(
    tmp_path: Path,
    factory: VoiceStacks,
    desks: dict[str, Desk],
    speech: dict[str, bytes],
) -> None:
    settings = ServerSettings(channels_dir=CHANNELS, db_path=tmp_path / "voicehub.db")
    room = "research:e2e-back"
    async with running_server(settings, voice=factory, desks=desks) as server:
        async with CallClient(options(server, "research", "e2e-back")) as call:
            await call.wait_for_turn()
            await call.say(speech[RESEARCH], RESEARCH)
            await call.wait_for(lambda: len(call.report.events_of(TaskFinished)) == 2, 30)
            await call.hangup()  # before the agent has even finished its answer
        assert call.report.events_of(DeliveryAttempt) == []

        async def held() -> list[dict[str, Any]]:
            while True:
                found = await server.get("/api/deliveries", params={"room": room})
                deliveries: list[dict[str, Any]] = found.json()["deliveries"]
                if deliveries and deliveries[0]["status"] == "held":
                    return deliveries
                await asyncio.sleep(0.05)

        [waiting] = await asyncio.wait_for(held(), 20)
        # the server stops here; the held result must survive in the store

    async with running_server(settings, voice=factory, desks=desks) as server:
        async with CallClient(options(server, "research", "e2e-back")) as back:
            assert back.report.resumed
            delivered = await back.wait_for_event(
                DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=60
            )
            assert await back.settle(30)
        assert delivered.delivery_id == waiting["id"]
        assert back.report.events_of(CallSession)[0].greeting is False
        segments = result_segments(back.report, waiting["id"])
        heard_keywords(await recognized(back.report, segments), HEAT_PUMP_WORDS, at_least=4)
        [done] = (await server.get("/api/deliveries", params={"room": room})).json()["deliveries"]
        assert (done["status"], done["attempts"]) == ("delivered", 1)


async def test_malformed_input_does_not_disturb_other_calls(server: RunningServer) -> None:
    url = f"{server.ws_url}/desks/research/call?conversation="
    async with CallClient(options(server, "research", "e2e-steady")) as steady:
        async with connect(url + "e2e-broken") as broken:
            await broken.send(bytes(333))
            await broken.send("hello?")
            errors: list[dict[str, Any]] = []
            while len(errors) < 2:
                message = await asyncio.wait_for(broken.recv(), 20)
                if isinstance(message, str) and json.loads(message)["type"] == "error":
                    errors.append(json.loads(message))
            assert [e["code"] for e in errors] == ["bad_audio_frame", "bad_json"]
            assert "333 bytes" in errors[0]["message"]
            await broken.send(bytes(64_000))
            with pytest.raises(ConnectionClosed):
                while True:
                    await asyncio.wait_for(broken.recv(), 20)
            assert broken.close_code == 1009
        async with connect(f"{server.ws_url}/desks/nowhere/call") as lost:
            with pytest.raises(ConnectionClosed):
                while True:
                    await asyncio.wait_for(lost.recv(), 20)
            assert lost.close_code == 4404 and "research" in (lost.close_reason or "")
        status = await steady.status()
        assert status is not None and status.room_id == "research:e2e-steady"
        await steady.wait_for_turn()  # the greeting still plays to the end
        assert steady.report.events_of(Transcript)[0].text.startswith("Hello")


async def test_voicehub_call_prints_the_timeline_and_writes_the_agent_audio(
    server: RunningServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "agent.wav"
    # `--fast` (burst caller, instant playout): this test is about the report and the WAV, not
    # about timing; bursts are heard like paced audio (tests/voice/engine/test_bursty_input.py).
    argv = ["call", "research", "--server", server.url, "--say", RESEARCH, "--fast"]
    argv += ["--conversation", "e2e-cli", "--out", str(out)]
    code = await asyncio.to_thread(cli.main, argv)  # its own loop, in a thread
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "tool      delegate_workers" in printed, printed
    assert "task      analyst-a started in research:e2e-cli::task-1" in printed
    assert "delivery  delivered (wait_for_idle, attempt 1)" in printed
    assert "voice-to-voice (end of caller speech -> first agent audio)" in printed
    assert "settled" in printed
    audio = read_wav(out)
    assert audio.sample_rate == 16000 and audio.duration > 20
