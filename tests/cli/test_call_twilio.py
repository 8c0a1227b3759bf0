"""`voicehub call --twilio` against the real server (scripted session, no models on the
server side): the signed webhook, the media stream with mu-law and marks, a timeline."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.cli import main
from voicehub.client.phone_call import (
    PhoneCallReport,
    format_phone_report,
    room_record,
    voice_to_voice,
)
from voicehub.core.events import Event, EventKind
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.settings import CarrierSettings
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub.voice.audio import read_wav
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "e" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret
PLIVO_TOKEN = "p" * 40


def phone_settings(tmp_path: Path, **extra: Any) -> ServerSettings:
    """A server that takes Twilio calls on its own SQLite file in `tmp_path`."""
    return ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
        **extra,
    )


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    settings = phone_settings(tmp_path)
    desks = {"research": load_desks(CHANNELS)["research"]}
    # The session answers the caller's words, so the client's turn ends without a 20 s wait.
    factory = ScriptedStack(answer="Hello! Ask me to research a topic.")
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


@pytest.mark.slow
async def test_a_phone_call_from_the_cli(
    server: RunningServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", AUTH_TOKEN)
    out = tmp_path / "agent.wav"
    argv = ["call", "research", "--twilio", "--server", server.url, "--public-url", PUBLIC]
    argv += ["--from", "+15550100301", "--say", "hello", "--fast", "--out", str(out)]
    argv += ["--timeout", "30"]
    code = await asyncio.to_thread(main, argv)
    captured = capsys.readouterr()
    printed = captured.out
    assert code == 0, printed
    room = f"research:{caller_conversation('+15550100301', NUMBER_KEY.encode())}"
    assert f"room {room}" in printed and 'caller    speaking "hello"' in printed
    assert "agent speech (mark" in printed and "settled" in printed
    # How the call ended, on stderr, as every `voicehub call` says it.
    assert captured.err.strip().endswith("voicehub call: the conversation settled; hung up")
    assert "PROTOCOL PROBLEM" not in printed
    [session] = server.switchboard.lifecycle.voice.sessions  # type: ignore[attr-defined]
    assert len(session.caller_audio) > 16000  # the words reached the session (16 kHz PCM)
    assert session.said[-1] == "Hello! Ask me to research a topic."  # answered once heard
    audio, rate = read_wav(out)
    assert rate == 8000 and len(audio) > 0  # the greeting, as played on the phone


async def test_a_wrong_auth_token_is_a_clear_error(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["call", "research", "--twilio", "--server", server.url, "--public-url", PUBLIC]
    argv += ["--say", "hello"]
    monkeypatch.delenv("TWILIO_AUTH_TOKEN", raising=False)
    assert await asyncio.to_thread(main, argv) == 2
    assert "TWILIO_AUTH_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "0" * 32)
    assert await asyncio.to_thread(main, argv) == 2
    err = capsys.readouterr().err
    assert "403" in err and "X-Twilio-Signature does not match" in err


async def test_the_phone_report_has_what_the_server_heard_said_ran_and_delivered(
    server: RunningServer,
) -> None:
    """The phone timeline takes the room's record and its tasks and deliveries, so it has
    the lines and totals the WebSocket and WebRTC report has (heard, agent, tool, task,
    delivery; voice-to-voice, tasks), not only the marks echoed. The room's events hold no
    task or delivery: the REST views of tasks and deliveries do."""
    since = time.time()
    hub = server.switchboard.hub
    room = await hub.create_room("research:phone-report", orchestration=None)
    await room.post(Event(kind=EventKind.TRANSCRIPT, text="research solar panels", role="user"))
    await room.post(
        Event(
            kind=EventKind.TOOL_CALL,
            text='{"task": "solar panels"}',
            role="assistant",
            source="desk",
            metadata={"tool": "delegate_workers"},
        )
    )
    analyst = load_desks(CHANNELS)["research"].agents["analyst-a"]
    task = await hub.delegate(analyst, "solar panels", room)
    assert (await task.result()).status == "ok"
    await hub.deliver(room.id, "Here is what I found.", "immediate")  # no call: held
    await until(lambda: _held(hub, room.id))
    record = await room_record(server.url, None, room.id, since)
    assert [(who, what) for _, who, what in record.entries] == [
        ("heard", '"research solar panels"'),
        ("tool", 'delegate_workers {"task": "solar panels"}'),
        ("task", f"analyst-a started in {task.child_room_id}: solar panels"),
        ("task", "analyst-a finished (ok)"),
        ("delivery", "held (immediate, attempt 0)"),
    ]
    report = PhoneCallReport(room_id=room.id, settled=True, latencies=[0.84])
    record.fill(report)
    printed = format_phone_report(report).splitlines()
    assert "voice-to-voice (end of caller speech -> first agent audio): 0.84 s" in printed
    assert "tasks: 1 started, 1 finished (ok); deliveries: held" in printed


async def _held(hub: Any, room_id: str) -> bool:
    held = await hub.store.list_deliveries(room_id=room_id)
    return bool(held) and all(d.status == "held" for d in held)


def test_voice_to_voice_is_from_each_end_of_speech_to_the_next_agent_audio() -> None:
    arrivals = [1.0, 1.02, 5.3, 5.32, 9.9]
    first = lambda moment: next((at for at in arrivals if at > moment), None)  # noqa: E731
    assert voice_to_voice([4.5, 9.0, 12.0], first) == pytest.approx([0.8, 0.9])


@pytest.mark.parametrize("carrier", [["--twilio"], ["--carrier", "plivo"]], ids=["twilio", "plivo"])
async def test_a_phone_call_to_a_desk_missing_its_keys_is_refused(
    carrier: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The refusal only, at once, exit 3: no timeline of a call that never ran, no WAV,
    no wait for a turn or a settle timeout."""
    for key in ("DEEPGRAM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", AUTH_TOKEN)
    monkeypatch.setenv("PLIVO_AUTH_TOKEN", PLIVO_TOKEN)
    settings = phone_settings(
        tmp_path, carriers=CarrierSettings(plivo_auth_token=PLIVO_TOKEN), prewarm=False
    )
    desks = {"research-cloud": load_desks(CHANNELS)["research-cloud"]}
    out = tmp_path / "agent.wav"
    async with running_server(settings, desks=desks) as running:
        argv = ["call", "research-cloud", *carrier, "--server", running.url]
        argv += ["--public-url", PUBLIC, "--from", "+15550100302", "--say", "research heat"]
        argv += ["--fast", "--out", str(out), "--timeout", "60"]
        started = time.monotonic()
        code = await asyncio.to_thread(main, argv)
        took = time.monotonic() - started
    captured = capsys.readouterr()
    assert code == 3, captured.err
    assert captured.out == ""
    assert captured.err == "voicehub call: refused (1011): could not start the call\n"
    assert not out.exists()
    assert took < 25, took  # not the 30 s wait for a greeting, nor the settle timeout


@pytest.mark.slow
async def test_a_returning_caller_is_not_left_waiting_for_a_greeting(
    server: RunningServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same number calls again: the conversation goes on and the server does not greet
    it, so the caller speaks after a moment, not after the wait for a greeting that never
    comes (live, the second phone call of phone.md and carriers.md from the default number
    spoke at 34.8 s, after the idle prompt 'Are you still there?')."""
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", AUTH_TOKEN)
    argv = ["call", "research", "--twilio", "--server", server.url, "--public-url", PUBLIC]
    argv += ["--from", "+15550100303", "--say", "hello", "--fast", "--timeout", "40"]
    spoke_at = []
    for attempt in range(2):
        code = await asyncio.to_thread(main, [*argv, "--out", str(tmp_path / f"{attempt}.wav")])
        printed = capsys.readouterr().out
        assert code == 0, printed
        [at] = re.findall(r"^\s*([\d.]+)  caller +speaking", printed, re.M)
        spoke_at.append(float(at))
    # the wait for a greeting is 20 s here (--timeout 40): the returning caller waits 3 s
    assert spoke_at[1] < 10, spoke_at
