"""Phone calls end to end: the fake Twilio (signed webhooks, a Media Streams client) against
the real server on 127.0.0.1, on the embedded stack, with Piper's speech sent as 8 kHz
mu-law in 20 ms frames and the agent's mu-law recognized back with PocketSphinx.

The fake plays the agent's audio 16x faster than real time and echoes each mark once the
audio before it has played: only then does the delivery service count the agent as idle.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.fakes.twilio import FakeTwilio, PhoneLineClient
from voicehub.client.call import caller_audio
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import OfflineSessionFactory
from voicehub.server.settings import ServerSettings
from voicehub.server.twilio import caller_conversation
from voicehub.voice.providers.offline import transcribe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.asyncio(loop_scope="module")

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "f" * 32
# Phone-band PocketSphinx hears "heat pumps" as "he pumped": solar panels come through.
RESEARCH = "please research solar panels"
SOLAR_WORDS = ("solar", "panel", "typical", "home", "twenty", "years", "cloudy")


@pytest.fixture(scope="module")
def factory() -> OfflineSessionFactory:
    return OfflineSessionFactory()


@pytest.fixture(scope="module")
def research_speech() -> bytes:
    return caller_audio(text=RESEARCH)


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return {"research": load_desks(CHANNELS)["research"]}


def settings_for(db: Path) -> ServerSettings:
    return ServerSettings(
        channels_dir=CHANNELS, db_path=db, public_url=PUBLIC, twilio_auth_token=AUTH_TOKEN
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory,
    factory: OfflineSessionFactory,
    desks: dict[str, Desk],
) -> AsyncIterator[RunningServer]:
    db = tmp_path_factory.mktemp("phone") / "voicehub.db"
    async with running_server(settings_for(db), session_factory=factory, desks=desks) as running:
        yield running


def twilio_for(server: RunningServer) -> FakeTwilio:
    return FakeTwilio(server.url, public_url=PUBLIC, auth_token=AUTH_TOKEN)


async def deliveries(server: RunningServer, room: str) -> list[dict[str, Any]]:
    found = await server.get("/api/deliveries", params={"room": room})
    result: list[dict[str, Any]] = found.json()["deliveries"]
    return result


async def until_delivery(server: RunningServer, room: str, status: str) -> dict[str, Any]:
    async def poll() -> dict[str, Any]:
        while True:
            for delivery in await deliveries(server, room):
                if delivery["status"] == status:
                    return delivery
            await asyncio.sleep(0.05)  # polling the REST view, not waiting for behaviour

    return await asyncio.wait_for(poll(), 60)


async def _until_tasks_finished(server: RunningServer, room: str) -> None:
    async def poll() -> None:
        while True:
            tasks = (await server.get("/api/tasks", params={"room": room})).json()["tasks"]
            if len(tasks) == 2 and all(t["status"] != "running" for t in tasks):
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), 60)


async def heard(phone: PhoneLineClient, since: int = 0) -> str:
    audio = bytes(phone.played.pcm16[since:])
    return await asyncio.to_thread(transcribe, audio[: 14 * 16000], 8000)


def keywords(text: str, at_least: int = 3) -> None:
    found = [word for word in SOLAR_WORDS if word in text]
    assert len(found) >= at_least, f"heard {text!r}; found only {found}"


# -- the flows ----------------------------------------------------------------------------------


async def test_research_by_phone_is_spoken_after_twilio_echoes_the_marks(
    server: RunningServer, research_speech: bytes
) -> None:
    twilio = twilio_for(server)
    caller = "+15550100001"
    room = f"research:{caller_conversation(caller)}"
    answer = await twilio.incoming_call("research", caller)
    assert answer.parameters["conversation"] == room.split(":", 1)[1]
    async with twilio.stream(answer, playout_speed=16.0) as phone:
        await phone.wait_quiet(1.0)  # the greeting
        assert phone.played.marks and "research" in await heard(phone)
        phone.hold_marks = True  # the agent's answer "plays", but Twilio confirms nothing
        frames = phone.media_frames()
        await phone.say(research_speech)
        await _until_tasks_finished(server, room)
        await phone.wait_quiet(1.0, after=frames)  # the agent's answer has arrived and played
        status = server.switchboard.status(server.switchboard.calls[room])
        assert status["playout_pending"] and not status["idle"]
        assert [d["status"] for d in await deliveries(server, room)] == ["pending"]

        before = len(phone.played.pcm16)
        await phone.release_marks()  # Twilio echoes: playout confirmed, the agent is idle
        delivered = await until_delivery(server, room, "delivered")
        assert delivered["attempts"] == 1
        await phone.wait_quiet(1.0)
        keywords(await heard(phone, before))
    frames = {f["event"] for f in phone.received}
    assert frames <= {"media", "mark", "clear"}, frames  # nothing Twilio would reject


async def test_hang_up_then_call_back_from_the_same_number_hears_the_held_result_once(
    tmp_path: Path,
    factory: OfflineSessionFactory,
    desks: dict[str, Desk],
    research_speech: bytes,
) -> None:
    caller = "+15550100002"
    room = f"research:{caller_conversation(caller)}"
    settings = settings_for(tmp_path / "voicehub.db")
    async with running_server(settings, session_factory=factory, desks=desks) as server:
        twilio = twilio_for(server)
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0) as phone:
            await phone.wait_quiet(1.0)
            await phone.say(research_speech)
            await _until_tasks_finished(server, room)  # hang up before the result is spoken
        held = await until_delivery(server, room, "held")
        # the server restarts: the held result must survive in the store

    async with running_server(settings, session_factory=factory, desks=desks) as server:
        twilio = twilio_for(server)
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0) as phone:
            delivered = await until_delivery(server, room, "delivered")
            await phone.wait_quiet(1.0)
            keywords(await heard(phone))
        assert delivered["id"] == held["id"] and delivered["attempts"] == 1

        # a third call from the number: nothing is waiting to be spoken again
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0):
            await _until_live(server, room)
            assert server.switchboard.hub.delivery.pending(room) == []
        [only] = await deliveries(server, room)
        assert (only["status"], only["attempts"]) == ("delivered", 1)


async def _until_live(server: RunningServer, room: str) -> None:
    async def poll() -> None:
        while (call := server.switchboard.calls.get(room)) is None or call.session is None:  # noqa: ASYNC110
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), 30)
