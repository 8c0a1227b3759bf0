"""`voicehub call --twilio` against the real server (scripted session, no models on the
server side): the signed webhook, the media stream with mu-law and marks, a timeline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from voicehub.cli import main
from voicehub.client.phone_call import PhoneCallReport, format_phone_report, room_timeline
from voicehub.core.events import Event, EventKind
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub.voice.audio import read_wav
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "e" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
    )
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
    """The phone timeline takes the room's record, so it has the lines the WebSocket and
    WebRTC report has (heard, agent, tool, task, delivery), not only the marks echoed."""
    since = time.time()
    hub = server.switchboard.hub
    room = await hub.create_room("research:phone-report", orchestration=None)
    for event in (
        Event(kind=EventKind.TRANSCRIPT, text="research solar panels", role="user"),
        Event(
            kind=EventKind.TOOL_CALL,
            text='{"task": "solar panels"}',
            role="assistant",
            source="desk",
            metadata={"tool": "delegate_workers"},
        ),
        Event(
            kind=EventKind.TRANSCRIPT,
            text="Sure, I'll look into solar panels.",
            role="assistant",
            source="desk",
        ),
        Event(kind=EventKind.DELIVERY, text="Here is what I found.", role="assistant"),
    ):
        await room.post(event)
    entries = await room_timeline(server.url, None, room.id, since)
    assert [(who, what) for _, who, what in entries] == [
        ("heard", '"research solar panels"'),
        ("tool", 'delegate_workers {"task": "solar panels"}'),
        ("agent", '"Sure, I\'ll look into solar panels."'),
        ("delivery", '"Here is what I found."'),
    ]
    report = PhoneCallReport(room_id=room.id, events=entries, settled=True)
    printed = format_phone_report(report)
    assert 'heard     "research solar panels"' in printed
    assert "tool      delegate_workers" in printed
