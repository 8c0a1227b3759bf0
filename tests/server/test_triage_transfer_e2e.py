"""A phone call to the triage desk that ends in a warm transfer, end to end: `voicehub call
--twilio` (Piper's words as 8 kHz mu-law, standing in for the account's REST API) against
the real server on the embedded stack (Silero, PocketSphinx, Piper, the scripted triage
agent). The caller asks about their bill; the agent says it will put them through, the call
is moved to hold in a conference, billing's phone is called, the person hears the briefing
and joins: the conference starts with the two of them, and the agent is off the call."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from voicehub.cli import main
from voicehub.desks.desk import load_desks
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

os.environ.setdefault("HF_HUB_OFFLINE", "1")

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "e" * 32
ACCOUNT = "AC" + "1" * 32
NUMBER_KEY = "k" * 32
CALLER = "+15550100401"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[RunningServer, int]]:
    api_port = free_port()  # the CLI serves the account's API there
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        twilio_account_sid=ACCOUNT,
        twilio_api_url=f"http://127.0.0.1:{api_port}",
        number_key=NUMBER_KEY,
    )
    loaded = load_desks(CHANNELS)
    desks = {name: loaded[name] for name in ("triage", "swarm")}
    async with running_server(settings, voice=default_voice_stacks(), desks=desks) as running:
        yield running, api_port


async def test_a_phone_call_to_triage_ends_in_a_warm_transfer_to_billing(
    server: tuple[RunningServer, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    running, api_port = server
    monkeypatch.setenv("TWILIO_AUTH_TOKEN", AUTH_TOKEN)
    monkeypatch.setenv("TWILIO_ACCOUNT_SID", ACCOUNT)
    argv = ["call", "triage", "--twilio", "--server", running.url, "--public-url", PUBLIC]
    argv += ["--from", CALLER, "--twilio-api", str(api_port), "--callee", "human"]
    argv += ["--say", "I have a question about my bill", "--fast", "--timeout", "90"]
    argv += ["--out", str(tmp_path / "agent.wav")]
    code = await asyncio.to_thread(main, argv)
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "PROBLEM" not in printed, printed
    calls = [
        line.removeprefix("twilio: ")
        for line in printed.splitlines()
        if line.startswith("twilio: ")
    ]

    # The caller's call went on hold in a conference, billing's phone was called from the
    # number the caller dialled, heard the briefing and joined: the conference started.
    [hold] = [line for line in calls if "inbound" in line and "conference: joined" in line]
    conference = hold.rsplit(" ", 1)[-1]
    assert any("inbound" in line and "hold audio: twilio hold music" in line for line in calls)
    person = [line for line in calls if "+15550009999 -> +15550100300" in line]
    assert any(line.endswith(f"conference: joined {conference}") for line in person), calls
    [briefing] = [line.split(": say: ", 1)[1] for line in person if ": say: " in line]
    assert briefing.startswith("Hello, this is the Help desk, with a caller for you. They said: ")
    assert "bill" in briefing and briefing.endswith("Connecting you now.")
    assert f"conference {conference}: in-progress, 2 joined" in calls, calls

    # The agent told the caller first; the conversation keeps the transfer (REST view).
    room_id = f"triage:{caller_conversation(CALLER, NUMBER_KEY.encode())}"
    room = (await running.get(f"/api/rooms/{room_id}")).json()
    [transfer] = room["room"]["metadata"]["transfers"]
    assert (transfer["target"], transfer["mode"], transfer["outcome"]) == (
        "billing",
        "warm",
        "connected",
    )
    texts = [e["text"] for e in room["events"]]
    assert "Please hold while I call billing for you." in texts
    assert room_id not in running.switchboard.calls  # the agent is off the call
