"""A research call by phone over each carrier's protocol, end to end: the carrier fakes
(signed webhooks, the media stream written from each carrier's docs) against the real
server on 127.0.0.1, on the embedded stack.

As on Twilio (`test_twilio_e2e.py`), the fake plays the agent's audio 16x faster than real
time and confirms each mark once the audio before it has played; the result is spoken only
after the carrier confirmed the agent's answer, once, and nothing the server sent is a frame
the carrier would reject.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.client.carrier_answers import StreamAnswer
from voicehub.client.carrier_line import CarrierLine
from voicehub.core.store.number_key import caller_conversation
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.settings import CarrierSettings
from voicehub.voice.providers.offline import transcribe
from voicehub_dev.fakes.plivo import PlivoSide
from voicehub_dev.fakes.telnyx import TelnyxSide
from voicehub_dev.fakes.vonage import VonageSide

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
NUMBER_KEY = "k" * 32
PLIVO_TOKEN = "p" * 40
VONAGE_SECRET = "v" * 40
RESEARCH = "please research solar panels"
SOLAR_WORDS = ("solar", "panel", "typical", "home", "twenty", "years", "cloudy")
TELNYX_KEY = secrets.token_bytes(32)  # the Telnyx account's signing key (its seed)


def fake(carrier: str, server: RunningServer) -> Any:
    if carrier == "telnyx":
        return TelnyxSide(server.url, PUBLIC, TELNYX_KEY)
    if carrier == "plivo":
        return PlivoSide(server.url, PUBLIC, PLIVO_TOKEN)
    return VonageSide(server.url, PUBLIC, VONAGE_SECRET)


@pytest.fixture(scope="module")
def research_speech() -> bytes:
    return spoken(RESEARCH)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    settings = ServerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path_factory.mktemp("carriers") / "voicehub.db",
        public_url=PUBLIC,
        number_key=NUMBER_KEY,
        carriers=CarrierSettings(
            telnyx_public_key=TelnyxSide(PUBLIC, PUBLIC, TELNYX_KEY).public_key,
            plivo_auth_token=PLIVO_TOKEN,
            vonage_signature_secret=VONAGE_SECRET,
        ),
    )
    desks: dict[str, Desk] = {"research": load_desks(CHANNELS)["research"]}
    factory = default_voice_stacks()
    async with running_server(settings, voice=factory, desks=desks) as running:
        yield running


async def deliveries(server: RunningServer, room: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (
        await server.get("/api/deliveries", params={"room": room})
    ).json()["deliveries"]
    return found


async def until_delivered(server: RunningServer, room: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next((d for d in await deliveries(server, room) if d["status"] == "delivered"), None)

    return await until(found, what=f"a delivered result in {room}", timeout=120, poll=0.05)


async def until_tasks_finished(server: RunningServer, room: str) -> None:
    async def finished() -> bool:
        tasks = (await server.get("/api/tasks", params={"room": room})).json()["tasks"]
        return len(tasks) == 2 and all(t["status"] != "running" for t in tasks)

    await until(finished, what=f"both tasks of {room} finished", poll=0.05)


async def heard(line: CarrierLine, since: int = 0) -> str:
    rate = line.dialect.rate
    audio = bytes(line.played.pcm16[since:])
    return await asyncio.to_thread(transcribe, audio[: 14 * 2 * rate], rate)


@pytest.mark.parametrize("carrier", ["telnyx", "plivo", "vonage"])
async def test_research_by_phone_is_spoken_once_the_carrier_confirmed_playout(
    server: RunningServer, research_speech: bytes, carrier: str
) -> None:
    phone = fake(carrier, server)
    caller = {"telnyx": "+15550100011", "plivo": "+15550100012", "vonage": "+15550100013"}[carrier]
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
    answer: StreamAnswer = await phone.incoming_call("research", caller)
    async with phone.stream(answer, playout_speed=16.0) as line:
        await line.wait_quiet(1.0)  # the greeting
        assert line.played.marks and "research" in await heard(line)
        line.hold_marks = True  # the answer "plays", but the carrier confirms nothing yet
        frames = line.media_received
        await line.say(research_speech)
        await until_tasks_finished(server, room)
        await line.wait_quiet(1.0, after=frames)
        status = server.switchboard.status(server.switchboard.calls[room])
        assert status.playout_pending and not status.idle
        assert [d["status"] for d in await deliveries(server, room)] == ["pending"]

        before = len(line.played.pcm16)
        await line.release_marks()  # playout confirmed: the agent is idle, the result goes
        delivered = await until_delivered(server, room)
        assert delivered["attempts"] == 1
        await line.wait_quiet(1.0)
        text = await heard(line, before)
        found = [word for word in SOLAR_WORDS if word in text]
        assert len(found) >= 3, f"heard {text!r}"
        assert server.switchboard.calls[room].kind == carrier
    assert line.problems == []  # nothing the carrier would reject
