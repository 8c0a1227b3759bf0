"""Call-backs over real sockets with a scripted session: the real `twilio` REST client talks
to a fake REST API, which rings a fake phone; attempt delays run on a virtual clock."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.core.clock import VirtualClock, settle
from voicehub.desks.desk import load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.callback import CallBacks
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio
from voicehub_dev.fakes.twilio_rest import FakeTwilioRest

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "c" * 32
NUMBER_KEY = "k" * 32  # the server's caller-number secret
ACCOUNT = "AC" + "0" * 32
CALLER = "+15550100201"
ROOM = f"research:{caller_conversation(CALLER, NUMBER_KEY.encode())}"
DELAY = 30.0


def channels_with_callback(tmp: Path, attempts: int) -> Path:
    text = (CHANNELS / "research.toml").read_text()
    phone = (
        f"\n[phone]\ncallback = true\ncallback_attempts = {attempts}\ncallback_delay = {DELAY}\n"
    )
    desks = tmp / "channels"
    shutil.copytree(CHANNELS, desks)
    (desks / "research.toml").write_text(text + phone)
    return desks


class Line:
    """The server, the fake Twilio (webhooks, media streams, REST) and the virtual clock."""

    def __init__(self, server: RunningServer, rest: FakeTwilioRest, clock: VirtualClock) -> None:
        self.server, self.rest, self.clock, self.twilio = server, rest, clock, rest.twilio
        self.factory: ScriptedStack = server.switchboard.lifecycle.voice  # type: ignore[assignment]

    @property
    def callbacks(self) -> CallBacks:
        found: CallBacks = self.server.app.state.parts.telephony.callbacks
        return found

    async def call_and_hang_up(self) -> None:
        """Call in and hang up once the session is live (and its greeting, if any, played)."""
        sessions = len(self.factory.sessions)
        answer = await self.twilio.incoming_call("research", CALLER)
        async with self.twilio.stream(answer, playout_speed=16.0) as phone:
            if (await self.session_after(sessions)).greeting:
                await phone.wait_quiet(0.2)
        call = self.server.switchboard.calls.get(ROOM)
        if call is not None:
            await asyncio.wait_for(call.finished.wait(), 10)

    async def session_after(self, count: int) -> ScriptedSession:
        """The session of the call that follows the first `count` sessions."""

        await until(lambda: len(self.factory.sessions) > count, timeout=10)
        return self.factory.sessions[count]

    async def held_result(self, text: str, task: str = "") -> str:
        delivery = self.server.switchboard.hub.delivery
        delivery_id = await delivery.deliver(ROOM, text, metadata={"task": task} if task else None)
        assert [r.status for r in delivery.pending(ROOM)][-1] == "held"
        return delivery_id

    async def next_attempt(self, seen: int) -> tuple[str, str]:
        """Let the delay pass on the virtual clock; the outcome of the attempt it starts."""
        assert len(self.rest.created) == seen  # nothing dialled before the delay is over
        await self.clock.advance(DELAY)

        async def done() -> None:
            while len(self.callbacks.history) <= seen:
                self.callbacks.changed.clear()
                await self.callbacks.changed.wait()

        await asyncio.wait_for(done(), 20)
        return self.callbacks.history[seen]


@pytest_asyncio.fixture
async def line(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Line]:
    attempts: int = getattr(request, "param", 3)
    channels = channels_with_callback(tmp_path, attempts)
    settings = ServerSettings(
        channels_dir=channels,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
        twilio_account_sid=ACCOUNT,
        twilio_api_url="http://127.0.0.1:1",  # replaced below once the fake listens
    )
    twilio = FakeTwilio("http://unset", public_url=PUBLIC, auth_token=AUTH_TOKEN)
    async with FakeTwilioRest(twilio) as rest:
        settings = settings.model_copy(update={"twilio_api_url": rest.url})
        clock = VirtualClock()
        desks = {"research": load_desks(channels)["research"]}
        async with running_server(
            settings, voice=ScriptedStack(), desks=desks, phone_clock=clock
        ) as server:
            twilio.local_url = server.url
            yield Line(server, rest, clock)


@pytest.mark.slow
async def test_no_answer_then_a_person_hears_the_result_once(line: Line) -> None:
    await line.call_and_hang_up()
    delivery_id = await line.held_result("Solar panels pay back in about ten years.")

    line.rest.callees.extend(["no-answer", "human"])
    assert line.callbacks.knows(ROOM)
    assert await line.next_attempt(0) == (ROOM, "no-answer")
    created = line.rest.created[0]
    assert (created["To"], created["From"]) == (CALLER, "+15550009999")  # from the number called
    # Asynchronous detection, its verdict at the end of a machine's greeting (the beep).
    assert (created["MachineDetection"], created["AsyncAmd"]) == ("DetectMessageEnd", "true")
    assert created["AsyncAmdStatusCallback"].startswith(f"{PUBLIC}/twilio/research/callback/")
    assert created["Url"].startswith(f"{PUBLIC}/twilio/research/callback/")
    assert [r.id for r in line.server.switchboard.hub.delivery.pending(ROOM)] == [delivery_id]

    sessions = len(line.factory.sessions)
    assert await line.next_attempt(1) == (ROOM, "answered")
    phone = await asyncio.wait_for(line.rest.answered.get(), 10)
    [person] = [c for c in line.rest.calls.values() if c.answered_by == "human"]
    [(sid, update)] = line.rest.updates  # the verdict moved the call from its pause to the stream
    assert sid == person.sid and "<Connect><Stream" in update["Twiml"]
    try:
        session = await line.session_after(sessions)
        await phone.wait_quiet(0.2)

        await until(
            lambda: "Solar panels pay back in about ten years." in session.said,
            timeout=10,
        )
    finally:
        await phone.hang_up()
    record = await line.server.switchboard.hub.store.get_delivery(delivery_id)
    assert record is not None and (record.status, record.attempts) == ("delivered", 1)

    # Calling in afterwards: nothing is spoken again, and no call-back follows.
    await line.call_and_hang_up()
    assert len(line.factory.sessions) == 3 and line.factory.sessions[2].said == []
    await line.clock.advance(10 * DELAY)
    await settle()
    assert len(line.rest.created) == 2 and line.rest.problems == [] and line.rest.refused == 0


@pytest.mark.slow
async def test_a_machine_gets_one_voicemail_and_the_results_stay_held(line: Line) -> None:
    await line.call_and_hang_up()
    first = await line.held_result("Heat pumps move heat rather than make it.", task="heat pumps")
    second = await line.held_result("Panels pay back in ten years.", task="solar panels")
    line.rest.callees.extend(["machine", "human"])
    assert await line.next_attempt(0) == (ROOM, "voicemail")
    [call] = [c for c in line.rest.calls.values() if c.direction == "outbound-api"]
    await asyncio.wait_for(call.ended.wait(), 10)
    # At the beep: the message, once, then the call hangs up; no stream was opened.
    assert call.said == [
        "Hello, this is Research desk calling back. Your results on heat pumps and solar "
        "panels are ready: call us back to hear them."
    ]
    assert call.status == "completed" and line.rest.answered.empty()
    pending = line.server.switchboard.hub.delivery.pending(ROOM)
    assert [(r.id, r.status) for r in pending] == [(first, "held"), (second, "held")]
    await line.clock.advance(10 * DELAY)  # no second call for that result set
    await settle()
    assert len(line.rest.created) == 1 and line.rest.problems == []

    sessions = len(line.factory.sessions)
    answer = await line.twilio.incoming_call("research", CALLER)  # they call back: both heard
    async with line.twilio.stream(answer, playout_speed=16.0) as phone:
        session = await line.session_after(sessions)

        await until(lambda: len(session.said) >= 2, timeout=10)
        await phone.wait_quiet(0.2, after=0)
    assert session.said == [
        "Heat pumps move heat rather than make it.",
        "Panels pay back in ten years.",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("line", [2], indirect=True)
async def test_after_the_last_attempt_the_result_stays_held_for_a_call_in(line: Line) -> None:
    await line.call_and_hang_up()
    line.rest.callees.extend(["busy", "no-answer"])
    delivery_id = await line.held_result("Heat pumps work down to minus twenty.")
    assert await line.next_attempt(0) == (ROOM, "busy")
    assert await line.next_attempt(1) == (ROOM, "no-answer")
    await line.clock.advance(10 * DELAY)
    await settle()
    assert len(line.rest.created) == 2  # at most `callback_attempts` calls

    answer = await line.twilio.incoming_call("research", CALLER)
    sessions = len(line.factory.sessions)
    async with line.twilio.stream(answer, playout_speed=16.0) as phone:
        session = await line.session_after(sessions)

        await until(lambda: session.said, timeout=10)
        await phone.wait_quiet(0.2, after=0)
    record = await line.server.switchboard.hub.store.get_delivery(delivery_id)
    assert record is not None and record.status == "delivered"
    assert session.said == ["Heat pumps work down to minus twenty."]


@pytest.mark.slow
async def test_a_caller_who_rings_back_during_the_delay_is_not_called(line: Line) -> None:
    await line.call_and_hang_up()
    await line.held_result("Insulation first, then the heat pump.")
    answer = await line.twilio.incoming_call("research", CALLER)
    async with line.twilio.stream(answer, playout_speed=16.0) as phone:
        await phone.wait_quiet(0.2)
        await line.clock.advance(DELAY)  # the call-back's delay ends while they are on
    await line.clock.advance(10 * DELAY)
    await settle()
    assert line.rest.created == [] and line.callbacks.history == []


async def test_a_refused_api_call_leaves_the_result_held(line: Line) -> None:
    line.rest.auth_token = "d" * 32  # the API no longer takes the server's credentials
    await line.call_and_hang_up()
    delivery_id = await line.held_result("Triple glazing rarely pays for itself.")
    assert await line.next_attempt(0) == (ROOM, "dial_failed")
    assert line.rest.refused == 1 and line.rest.created == []
    [record] = line.server.switchboard.hub.delivery.pending(ROOM)
    assert (record.id, record.status) == (delivery_id, "held")


async def test_call_back_webhooks_are_signed_and_an_unknown_attempt_hangs_up(line: Line) -> None:
    params = {"CallSid": "CA" + "2" * 32, "AnsweredBy": "human", "CallStatus": "in-progress"}
    path = "/twilio/research/callback/not-an-attempt"
    unsigned = await line.twilio.post(path, params, signature=None)
    assert unsigned.status_code == 403
    answer = await line.twilio.post(path, params)
    assert answer.status_code == 200 and "<Hangup" in answer.text and "Stream" not in answer.text
    status = await line.twilio.post(path + "/status", {**params, "CallStatus": "completed"})
    assert status.status_code == 204
    assert len(line.server.app.state.parts.phone.tokens) == 0  # no stream token was minted


async def test_a_draining_server_places_no_call_back_and_keeps_the_result_held(
    line: Line,
) -> None:
    await line.call_and_hang_up()
    delivery_id = await line.held_result("Solar pays back in nine years here.")
    line.server.app.state.parts.drain.begin()  # SIGTERM: the stream a call-back opens is refused
    assert await line.next_attempt(0) == (ROOM, "draining")
    assert line.rest.created == []
    [record] = line.server.switchboard.hub.delivery.pending(ROOM)
    assert (record.id, record.status) == (delivery_id, "held")
