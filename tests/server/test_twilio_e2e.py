"""Phone calls end to end: the fake Twilio (signed webhooks, a Media Streams client) against
the real server on 127.0.0.1, on the embedded stack, with Piper's speech sent as 8 kHz
mu-law in 20 ms frames and the agent's mu-law recognized back with PocketSphinx.

The fake plays the agent's audio 16x faster than real time and echoes each mark once the
audio before it has played: only then does the delivery service count the agent as idle.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.desks.desk import Desk, load_desks
from voicehub.desks.voice_stack import VoiceStacks, default_voice_stacks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub.voice.providers.offline import synthesize, transcribe
from voicehub_dev.fakes.twilio import FakeTwilio, PhoneLineClient
from voicehub_dev.fakes.twilio_rest import FakeTwilioRest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "f" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret
# Phone-band PocketSphinx hears "heat pumps" as "he pumped": solar panels come through.
RESEARCH = "please research solar panels"
SOLAR_WORDS = ("solar", "panel", "typical", "home", "twenty", "years", "cloudy")


@pytest.fixture(scope="module")
def factory() -> VoiceStacks:
    return default_voice_stacks()


@pytest.fixture(scope="module")
def research_speech() -> bytes:
    return spoken(RESEARCH)


@pytest.fixture(scope="module")
def desks() -> dict[str, Desk]:
    return {"research": load_desks(CHANNELS)["research"]}


def settings_for(db: Path) -> ServerSettings:
    return ServerSettings(
        channels_dir=CHANNELS,
        db_path=db,
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    tmp_path_factory: pytest.TempPathFactory,
    factory: VoiceStacks,
    desks: dict[str, Desk],
) -> AsyncIterator[RunningServer]:
    db = tmp_path_factory.mktemp("phone") / "voicehub.db"
    async with running_server(settings_for(db), voice=factory, desks=desks) as running:
        yield running


def twilio_for(server: RunningServer) -> FakeTwilio:
    return FakeTwilio(server.url, public_url=PUBLIC, auth_token=AUTH_TOKEN)


async def deliveries(server: RunningServer, room: str) -> list[dict[str, Any]]:
    found = await server.get("/api/deliveries", params={"room": room})
    result: list[dict[str, Any]] = found.json()["deliveries"]
    return result


async def until_delivery(server: RunningServer, room: str, status: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next((d for d in await deliveries(server, room) if d["status"] == status), None)

    try:
        # Generous: on a loaded machine the offline stack runs behind real time.
        return await until(found, timeout=120, poll=0.05)
    except AssertionError:
        seen = [(d["status"], d["attempts"]) for d in await deliveries(server, room)]
        raise AssertionError(f"no {status!r} delivery in {room}; there are {seen}") from None


async def _until_tasks_finished(server: RunningServer, room: str) -> None:
    async def finished() -> bool:
        tasks = (await server.get("/api/tasks", params={"room": room})).json()["tasks"]
        return len(tasks) == 2 and all(t["status"] != "running" for t in tasks)

    await until(finished, what=f"both tasks of {room} finished", poll=0.05)


async def heard(phone: PhoneLineClient, since: int = 0) -> str:
    audio = bytes(phone.played.pcm16[since:])
    return await asyncio.to_thread(transcribe, audio[: 14 * 16000], 8000)


def keywords(text: str, at_least: int = 3) -> None:
    found = [word for word in SOLAR_WORDS if word in text]
    assert len(found) >= at_least, f"heard {text!r}; found only {found}"


async def heard_result(phone: PhoneLineClient, delivered: dict[str, Any], since: int = 0) -> None:
    """The whole delivered result played on the phone: as long as its speech (the played
    audio is compared with the result synthesized here), and recognizably about solar
    panels."""
    played = (len(phone.played.pcm16) - since) / 2 / 8000
    speech = await asyncio.to_thread(synthesize, delivered["content"], "piper", 8000)
    expected = len(speech) / 2 / 8000
    assert played >= 0.8 * expected, f"played {played:.1f} s of a {expected:.1f} s result"
    keywords(await heard(phone, since))
    keywords(delivered["content"].lower())


# -- the flows ----------------------------------------------------------------------------------


async def test_research_by_phone_is_spoken_after_twilio_echoes_the_marks(
    server: RunningServer, research_speech: bytes
) -> None:
    twilio = twilio_for(server)
    caller = "+15550100001"
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
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
        assert status.playout_pending and not status.idle
        assert [d["status"] for d in await deliveries(server, room)] == ["pending"]

        before = len(phone.played.pcm16)
        await phone.release_marks()  # Twilio echoes: playout confirmed, the agent is idle
        delivered = await until_delivery(server, room, "delivered")
        assert delivered["attempts"] == 1
        await phone.wait_quiet(1.0)
        await heard_result(phone, delivered, before)
    frames = {f["event"] for f in phone.received}
    assert frames <= {"media", "mark", "clear"}, frames  # nothing Twilio would reject


async def test_hang_up_then_call_back_from_the_same_number_hears_the_held_result_once(
    tmp_path: Path,
    factory: VoiceStacks,
    desks: dict[str, Desk],
    research_speech: bytes,
) -> None:
    caller = "+15550100002"
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
    settings = settings_for(tmp_path / "voicehub.db")
    async with running_server(settings, voice=factory, desks=desks) as server:
        twilio = twilio_for(server)
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0) as phone:
            await phone.wait_quiet(1.0)
            # Twilio confirms no playout from here on, so the agent never counts as idle
            # and the result cannot start before the hang-up (under load, it could).
            phone.hold_marks = True
            await phone.say(research_speech)
            await _until_tasks_finished(server, room)  # hang up before the result is spoken
        held = await until_delivery(server, room, "held")
        assert held["attempts"] == 0
        # the server restarts: the held result must survive in the store

    async with running_server(settings, voice=factory, desks=desks) as server:
        twilio = twilio_for(server)
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0) as phone:
            delivered = await until_delivery(server, room, "delivered")
            await phone.wait_quiet(1.0)
            await heard_result(phone, delivered)
        assert delivered["id"] == held["id"] and delivered["attempts"] == 1

        # a third call from the number: nothing is waiting to be spoken again
        answer = await twilio.incoming_call("research", caller)
        async with twilio.stream(answer, playout_speed=16.0):
            await _until_live(server, room)
            assert server.switchboard.hub.delivery.pending(room) == []
        [only] = await deliveries(server, room)
        assert (only["status"], only["attempts"]) == ("delivered", 1)


async def _until_live(server: RunningServer, room: str) -> None:
    def live() -> bool:
        call = server.switchboard.calls.get(room)
        return call is not None and call.session is not None

    await until(live, what=f"the call in {room} live", timeout=30)


async def test_a_caller_who_barges_in_gets_clear_and_the_result_again_at_the_next_gap(
    server: RunningServer, research_speech: bytes
) -> None:
    twilio = twilio_for(server)
    caller = "+15550100003"
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
    interruption = spoken("hold on a moment")
    answer = await twilio.incoming_call("research", caller)
    async with twilio.stream(answer, playout_speed=16.0) as phone:
        await phone.wait_quiet(1.0)
        phone.hold_marks = True  # the agent's answer plays fast, but is not confirmed yet
        frames = phone.media_frames()
        await phone.say(research_speech)
        await phone.wait_quiet(1.0, after=frames)
        # Real-time playout from here: the result takes seconds to play, time enough to talk
        # over it. It cannot start before the answer's marks are echoed.
        phone.playout_speed = 1.0
        await phone.release_marks()
        await until_delivery(server, room, "delivering")
        # Counted in audio played, not frames received: the pre-rendered result reaches the
        # phone in one burst, often before the REST poll sees `delivering`. The agent was
        # idle (its marks echoed) when the result was claimed, so what plays now is the result.
        played = len(phone.played.pcm16)

        await until(lambda: len(phone.played.pcm16) >= played + 2 * 8000, timeout=30)
        await phone.say(interruption)
        interrupted = await until_delivery(server, room, "interrupted")
        assert phone.clears >= 1 and interrupted["attempts"] == 1
        phone.playout_speed = 16.0  # what is heard again matters now, not its pace
        before = len(phone.played.pcm16)
        delivered = await until_delivery(server, room, "delivered")
        assert delivered["id"] == interrupted["id"] and delivered["attempts"] == 2
        await phone.wait_quiet(1.0)
        await heard_result(phone, delivered, before)  # the whole result, after the interruption


async def test_a_call_back_is_answered_and_the_result_heard_once(
    tmp_path: Path,
    factory: VoiceStacks,
    research_speech: bytes,
) -> None:
    caller = "+15550100004"
    room = f"research:{caller_conversation(caller, NUMBER_KEY.encode())}"
    channels = tmp_path / "channels"
    shutil.copytree(CHANNELS, channels)
    research = channels / "research.toml"
    research.write_text(research.read_text() + "\n[phone]\ncallback = true\ncallback_delay = 0\n")
    settings = settings_for(tmp_path / "voicehub.db").model_copy(
        update={"channels_dir": channels, "twilio_account_sid": "AC" + "0" * 32}
    )
    twilio = FakeTwilio("http://unset", public_url=PUBLIC, auth_token=AUTH_TOKEN)
    async with FakeTwilioRest(twilio) as rest:
        rest.callees.append("human")
        settings = settings.model_copy(update={"twilio_api_url": rest.url})
        desks = {"research": load_desks(channels)["research"]}
        async with running_server(settings, voice=factory, desks=desks) as server:
            twilio.local_url = server.url
            answer = await twilio.incoming_call("research", caller)
            async with twilio.stream(answer, playout_speed=16.0) as phone:
                await phone.wait_quiet(1.0)
                phone.hold_marks = True  # see the hang-up test: no result before hanging up
                await phone.say(research_speech)
                await _until_tasks_finished(server, room)
            # The call-back rings; the fake phone answers it as a person.
            callback = await asyncio.wait_for(rest.answered.get(), 60)
            try:
                delivered = await until_delivery(server, room, "delivered")
                await callback.wait_quiet(1.0)
                await heard_result(callback, delivered)
            finally:
                await callback.hang_up()
            assert delivered["attempts"] == 1 and len(rest.created) == 1
            assert rest.created[0]["To"] == caller and rest.problems == []

            answer = await twilio.incoming_call("research", caller)  # calling in afterwards
            async with twilio.stream(answer, playout_speed=16.0):
                await _until_live(server, room)
                assert server.switchboard.hub.delivery.pending(room) == []
            [only] = await deliveries(server, room)
            assert (only["status"], only["attempts"]) == ("delivered", 1)
