"""Transfers and keypad tones on Twilio calls, over real sockets: the triage desk's tools
act through the real `twilio` REST client on the fake account (calls redirected,
conferences, a person's phone called), with a scripted session in the server; the agent's
wait for its own reply to play runs on a virtual clock."""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from twilio.rest import Client

from tests.e2e_helpers import RunningServer, running_server
from tests.support.waiting import until
from voicehub.agents.tools import ToolContext
from voicehub.core.clock import VirtualClock
from voicehub.delivery.policy import WaitForIdle
from voicehub.desks.desk import Desk, load_desks
from voicehub.server.settings import ServerSettings
from voicehub.telephony.twilio.transfer import TwilioTransfers
from voicehub.telephony.twilio.webhooks import caller_conversation
from voicehub.tools.telephony import send_dtmf_tool
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack
from voicehub_dev.fakes.twilio import FakeTwilio, PhoneLineClient
from voicehub_dev.fakes.twilio_rest import Call, FakeTwilioRest

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
PUBLIC = "https://voicehub.test"
AUTH_TOKEN = "c" * 32
NUMBER_KEY = "k" * 32
ACCOUNT = "AC" + "0" * 32
CALLER = "+15550100201"
BILLING = "+15550100300"
ROOM = f"triage:{caller_conversation(CALLER, NUMBER_KEY.encode())}"


class Line:
    """The server, the fake Twilio account, the virtual clock, and one caller's call."""

    def __init__(self, server: RunningServer, rest: FakeTwilioRest, clock: VirtualClock) -> None:
        self.server, self.rest, self.clock, self.twilio = server, rest, clock, rest.twilio
        self.factory: ScriptedStack = server.switchboard.lifecycle.voice  # type: ignore[assignment]

    @property
    def transfers(self) -> TwilioTransfers:
        found: TwilioTransfers = self.server.app.state.parts.telephony.transfers
        return found

    @property
    def desk(self) -> Desk:
        return self.server.switchboard.desks["triage"]

    async def call_in(self) -> tuple[Call, PhoneLineClient, ScriptedSession]:
        """The caller rings the triage desk; the account knows the call (it may redirect it)."""
        sessions = len(self.factory.sessions)
        answer = await self.twilio.incoming_call("triage", CALLER)
        phone = self.rest.phone_line(answer)
        await phone.open()
        call = self.rest.adopt_inbound(answer, phone, CALLER)
        session = await self.session_after(sessions)
        await phone.wait_quiet(0.2)  # the greeting
        return call, phone, session

    async def session_after(self, count: int) -> ScriptedSession:
        await until(lambda: len(self.factory.sessions) > count, timeout=10)
        return self.factory.sessions[count]

    async def use(self, tool_name: str, session: ScriptedSession, **arguments: Any) -> Any:
        """The triage agent calls `tool_name`, then says its answer (as its reply would)."""
        [tool] = [t for t in self.desk.agents["triage"].tools if t.name == tool_name]
        context = ToolContext(hub=self.server.switchboard.hub, room_id=ROOM, agent_id="triage")
        result = await tool.invoke(arguments, context)
        await session.say(result.data["say"])
        await self.clock.advance(1.0)  # the agent has been quiet long enough
        return result.data

    async def outcome(self, seen: int = 0) -> tuple[str, str]:
        async def done() -> None:
            while len(self.transfers.history) <= seen:
                self.transfers.changed.clear()
                await self.transfers.changed.wait()

        await asyncio.wait_for(done(), 20)
        return self.transfers.history[seen]

    def client(self) -> Client:
        client = Client(ACCOUNT, AUTH_TOKEN)
        client.api.base_url = self.rest.url
        return client


@pytest_asyncio.fixture
async def line(tmp_path: Path) -> AsyncIterator[Line]:
    async with serving(tmp_path, CHANNELS) as running:
        yield running


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, channels: Path) -> AsyncIterator[Line]:
    settings = ServerSettings(
        channels_dir=channels,
        db_path=tmp_path / "voicehub.db",
        public_url=PUBLIC,
        twilio_auth_token=AUTH_TOKEN,
        number_key=NUMBER_KEY,
        twilio_account_sid=ACCOUNT,
    )
    twilio = FakeTwilio("http://unset", public_url=PUBLIC, auth_token=AUTH_TOKEN)
    async with FakeTwilioRest(twilio) as rest:
        settings = settings.model_copy(update={"twilio_api_url": rest.url})
        clock = VirtualClock()
        loaded = load_desks(channels)
        desks = {name: loaded[name] for name in ("triage", "swarm")}
        async with running_server(
            settings, voice=ScriptedStack(), desks=desks, phone_clock=clock
        ) as server:
            twilio.local_url = server.url
            yield Line(server, rest, clock)


def twiml(form: dict[str, str]) -> ET.Element:
    return ET.fromstring(form["Twiml"])


async def test_a_warm_transfer_briefs_the_person_and_joins_the_two(line: Line) -> None:
    caller, phone, session = await line.call_in()
    line.rest.callees.append("human")
    await line.server.switchboard.hub.delivery.deliver(  # waiting for a gap, not spoken yet
        ROOM,
        "Your refund was approved.",
        strategy=WaitForIdle(600),
        metadata={"task": "your refund"},
    )
    said = await line.use("transfer_call", session, target="Billing", summary="Double charge")
    assert said == {
        "status": "transferring",
        "target": "billing",
        "mode": "warm",
        "say": "Please hold while I call billing for you.",
    }
    assert await line.outcome() == (ROOM, "connected")

    # The caller was put on hold in a conference of their own (the stream ended), ...
    (sid, hold), *_ = line.rest.updates
    conference = twiml(hold).find("./Dial/Conference")
    assert sid == caller.sid and conference is not None and phone.closed.is_set()
    assert conference.get("startConferenceOnEnter") == "false"
    assert conference.get("endConferenceOnExit") == "true"
    # ... the person was called from the number the caller dialled, with detection, ...
    [created] = line.rest.created
    assert (created["To"], created["From"]) == (BILLING, "+15550009999")
    assert created["MachineDetection"] == "Enable" and created["Timeout"] == "20"
    [person] = [c for c in line.rest.calls.values() if c.to == BILLING]
    # ... heard the briefing (the summary and the result waiting), and joined them.
    assert person.said == [
        "Hello, this is the Help desk, with a caller for you. They said: Double charge. "
        "Results on your refund are waiting for them. Connecting you now."
    ]
    name = conference.text or ""
    assert caller.conference == name and person.conference == name
    # Read back through the real client (in a thread: the fake API serves on this loop).
    client = line.client()
    [found] = await asyncio.to_thread(
        client.conferences.list, friendly_name=name, status="in-progress"
    )
    participants = await asyncio.to_thread(client.conferences(found.sid).participants.list)
    assert {p.call_sid for p in participants} == {caller.sid, person.sid}

    # The conversation keeps the outcome (REST view), and the agent is off the call.
    room = (await line.server.get(f"/api/rooms/{ROOM}")).json()
    [transfer] = room["room"]["metadata"]["transfers"]
    assert (transfer["target"], transfer["mode"], transfer["outcome"]) == (
        "billing",
        "warm",
        "connected",
    )
    assert "Transfer to billing (warm): connected" in [e["text"] for e in room["events"]]
    assert ROOM not in line.server.switchboard.calls and line.rest.problems == []


async def test_a_caller_on_hold_hears_the_desks_hold_sound(tmp_path: Path) -> None:
    from voicehub.voice.audio import read_wav
    from voicehub.voice.sounds.clips import sound_pcm

    channels = tmp_path / "channels"
    shutil.copytree(CHANNELS, channels)
    with (channels / "triage.toml").open("a") as desk_file:
        desk_file.write('\n[voice.sounds]\nhold = "hold-music"\nvolume_db = -6.0\n')
    async with serving(tmp_path, channels) as line:
        caller, _, session = await line.call_in()
        line.rest.callees.append("human")
        await line.use("transfer_call", session, target="billing", summary="Double charge")
        assert await line.outcome() == (ROOM, "connected")
        (_, hold), *_ = line.rest.updates
        conference = twiml(hold).find("./Dial/Conference")
        assert conference is not None
        wait = conference.get("waitUrl") or ""
        assert (wait, conference.get("waitMethod")) == (f"{PUBLIC}/twilio/triage/hold", "POST")
        assert caller.played == [wait]  # what the caller heard while billing rang

        # Twilio fetches the wait URL (signed), and loops the sound it names
        assert (
            await line.twilio.post_to(wait, {"CallSid": caller.sid}, signature="x")
        ).status_code == 403
        answer = await line.twilio.post_to(wait, {"CallSid": caller.sid})
        play = ET.fromstring(answer.text).find("./Play")
        assert play is not None and play.get("loop") == "0"
        assert play.text == f"{PUBLIC}/twilio/triage/hold.wav"
        async with httpx.AsyncClient() as client:
            sound = await client.get(line.twilio.local(play.text))
            missing = await client.get(line.twilio.local(f"{PUBLIC}/twilio/swarm/hold.wav"))
        assert sound.headers["content-type"] == "audio/wav"
        audio = read_wav(io.BytesIO(sound.content))
        assert audio.sample_rate == 8000
        assert audio.pcm16 == sound_pcm("hold-music", 8000, -6.0)
        assert missing.status_code == 404  # a desk with no hold sound: Twilio's own music


@pytest.mark.parametrize("callee", ["no-answer", "busy", "machine"])
async def test_nobody_answering_brings_the_caller_back_to_take_a_message(
    line: Line, callee: str
) -> None:
    caller, _, session = await line.call_in()
    line.rest.callees.append(callee)
    await line.use("transfer_call", session, target="billing", summary="Invoice question")
    assert await line.outcome() == (ROOM, "machine" if callee == "machine" else callee)

    # Back to the agent: a fresh stream on the same call, and the agent says why at once.
    back = await line.session_after(1)
    hold, stream = [form for sid, form in line.rest.updates if sid == caller.sid]
    assert twiml(hold).find("./Dial/Conference") is not None
    assert twiml(stream).find("./Connect/Stream") is not None
    reason = {
        "no-answer": "nobody at billing answered",
        "busy": "the line at billing is busy",
        "machine": "billing is not picking up",
    }[callee]

    await until(lambda: back.said, timeout=10)
    assert back.said == [
        f"Sorry, {reason}. I can take a message for them, or help you with something else."
    ]
    assert caller.stream is not None and not caller.stream.closed.is_set()

    # The caller leaves a message: kept with the conversation, for billing.
    taken = await line.use("take_message", back, message="Please call me about invoice 42.")
    assert taken["say"] == "I've taken your message for billing. They will get back to you."
    room = (await line.server.get(f"/api/rooms/{ROOM}")).json()
    [message] = room["room"]["metadata"]["messages"]
    assert (message["for"], message["text"]) == ("billing", "Please call me about invoice 42.")
    assert "Message for billing: Please call me about invoice 42." in [
        e["text"] for e in room["events"]
    ]
    [transfer] = room["room"]["metadata"]["transfers"]
    assert transfer["outcome"] == ("machine" if callee == "machine" else callee)
    [person] = [c for c in line.rest.calls.values() if c.to == BILLING]
    assert person.said == [] and line.rest.problems == []
    await caller.end()


async def test_a_cold_transfer_dials_the_target_and_leaves(line: Line) -> None:
    caller, phone, session = await line.call_in()
    line.rest.callees.append("human")
    said = await line.use("transfer_call", session, target="billing", mode="cold")
    assert said["say"] == "I'm putting you through to billing now."
    await line.rest.wait_for(lambda: f"dial: {BILLING} answered: bridged" in caller.history)
    [(sid, form)] = line.rest.updates
    dial = twiml(form).find("./Dial")
    assert sid == caller.sid and dial is not None and phone.closed.is_set()
    assert (dial.findtext("Number"), dial.get("timeout")) == (BILLING, "20")
    assert line.rest.created == []  # no call of ours: Twilio dials from the caller's call
    await caller.end()  # the two talk, then hang up: the dial's action says so
    assert await line.outcome() == (ROOM, "connected")


@pytest.mark.parametrize("stop", [True, False], ids=["stop_sent", "socket_closed_only"])
async def test_a_transferred_call_is_not_taken_back_when_its_stream_ends(
    line: Line, stop: bool
) -> None:
    """The transfer's redirect ends the agent's stream (Twilio sends `stop`, or, were that
    frame lost, only closes the socket) and Twilio reports `stream-stopped`: the take-over
    must not redirect the caller back to the agent, off the person they were put through to."""
    caller, phone, session = await line.call_in()
    if not stop:
        phone.hang_up = phone.close  # type: ignore[method-assign]
    line.rest.callees.append("human")
    await line.use("transfer_call", session, target="billing", mode="cold")
    await line.rest.wait_for(lambda: f"dial: {BILLING} answered: bridged" in caller.history)
    live = line.server.switchboard.calls.get(ROOM)
    if live is not None:
        await live.finished.wait()
    conversation = ROOM.split(":", 1)[1]
    params = {**caller.params(), "StreamSid": phone.stream_sid, "StreamEvent": "stream-stopped"}
    status = await line.twilio.post(f"/twilio/triage/status?conversation={conversation}", params)
    assert status.status_code == 204
    takeover = line.server.app.state.parts.takeover
    await line.clock.advance(10.0)  # past the take-over's grace
    await takeover.wait()
    assert takeover.redirected == []
    [(sid, form)] = line.rest.updates  # the transfer's own <Dial>, nothing after it
    assert sid == caller.sid and twiml(form).find("./Dial") is not None
    record = await line.server.switchboard.hub.store.get_call(ROOM)
    assert record is not None and not record.state.open
    assert caller.bridged and caller.status == "in-progress"
    await caller.end()


async def test_a_cold_transfer_nobody_answers_comes_back_to_the_agent(line: Line) -> None:
    caller, _, session = await line.call_in()
    line.rest.callees.append("busy")
    await line.use("transfer_call", session, target="billing", mode="cold")
    assert await line.outcome() == (ROOM, "busy")
    back = await line.session_after(1)

    await until(lambda: back.said, timeout=10)
    assert back.said[0].startswith("Sorry, the line at billing is busy.")
    await caller.end()


async def test_bad_targets_are_refused_and_the_caller_stays(line: Line) -> None:
    caller, phone, session = await line.call_in()
    unknown = await line.use("transfer_call", session, target="accounts")
    assert unknown["status"] == "refused"
    assert unknown["error"] == (
        "there is no transfer target called 'accounts'; I can put the caller through to: billing."
    )
    assert unknown["say"].endswith("You are still with me.")
    number = await line.use("transfer_call", session, target="+1 (555) 010-0999")
    assert number["error"].startswith("this desk does not allow transfers to +15550100999")
    assert line.rest.updates == [] and line.rest.created == []
    assert not phone.closed.is_set() and ROOM in line.server.switchboard.calls
    await caller.end()


async def test_keypad_tones_play_and_the_agent_comes_back(line: Line) -> None:
    caller, _, session = await line.call_in()
    context = ToolContext(hub=line.server.switchboard.hub, room_id=ROOM, agent_id="triage")
    bad = await send_dtmf_tool().invoke({"digits": "12x"}, context)
    assert bad.is_error and "digits" in bad.content
    result = await send_dtmf_tool().invoke({"digits": "1w2#"}, context)
    assert result.data == {"status": "sent", "digits": "1w2#", "say": "Pressing 1 2 #."}
    await session.say(result.data["say"])
    await line.clock.advance(1.0)
    back = await line.session_after(1)
    assert back.room_id == ROOM and caller.digits == ["1w2#"]
    [(_, form)] = line.rest.updates
    # the stream again, with the <Redirect> that brings the call back if it drops
    assert [v.tag for v in twiml(form)] == ["Play", "Connect", "Redirect"]
    await caller.end()
