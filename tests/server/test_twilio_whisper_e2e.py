"""A phone desk on Whisper (`[voice] stt = "whisper"`), end to end over real sockets: the
caller's request in Piper's voice goes through the fake Twilio's mu-law media stream, the
session's VAD hands the utterance to Whisper, and the scripted front agent delegates the
right topic. PocketSphinx hears this request's "heat pumps" as "he pumped" on the phone."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.desks.desk import load_desks
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub_dev.fakes.twilio import FakeTwilio

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "w" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret
REQUEST = "could you dig into heat pumps for me"


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningServer]:
    folder = tmp_path / "channels"
    folder.mkdir()
    shutil.copytree(CHANNELS / "knowledge", folder / "knowledge")
    lines = [
        'stt = "whisper"' if line.startswith("stt = ") else line
        for line in (CHANNELS / "research.toml").read_text().splitlines()
    ]
    (folder / "research.toml").write_text("\n".join(lines) + "\n")
    desks = {"research": load_desks(folder)["research"]}
    assert desks["research"].config.voice.stt == "whisper"
    settings = ServerSettings(
        channels_dir=folder,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
    )
    factory = default_voice_stacks()
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


async def until_delegated(server: RunningServer, room: str) -> list[dict[str, Any]]:
    async def tasks() -> list[dict[str, Any]]:
        return list((await server.get("/api/tasks", params={"room": room})).json()["tasks"])

    # generous: a loaded machine runs behind
    return await until(tasks, what=f"a task in {room}", timeout=120, poll=0.05)


async def test_a_phone_request_is_heard_by_whisper_and_delegated(server: RunningServer) -> None:
    twilio = FakeTwilio(server.url, public_url=PUBLIC, auth_token=AUTH_TOKEN)
    caller = "+15550100901"
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
    answer = await twilio.incoming_call("research", caller)
    async with twilio.stream(answer, playout_speed=16.0) as phone:
        await phone.wait_quiet(1.0)  # the greeting
        await phone.say(spoken(REQUEST))
        tasks = await until_delegated(server, room)
    assert {task["input"].lower() for task in tasks} == {"heat pumps"}, tasks
