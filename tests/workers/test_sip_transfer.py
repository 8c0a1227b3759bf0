"""Transfers and keypad tones for LiveKit SIP callers: the triage desk's tools act through
livekit's real `livekit-api` client against the fake LiveKit server's SIP service (Twirp,
protobuf, the token's grants checked), on a desk job in a stand-in room with a scripted
session; the agent's wait for its reply to play runs on a virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from voicehub.agents.tools import ToolContext
from voicehub.core.clock import VirtualClock
from voicehub.core.store.sqlite import SQLiteStore
from voicehub.desks.agent_quiet import agent_busy
from voicehub.desks.call_lifecycle import CallLifecycle
from voicehub.desks.desk import Desk, build_desk
from voicehub.desks.loading import load_desk_folder
from voicehub.hub import Hub
from voicehub.telephony.livekit_sip import SipAccess, SipControls
from voicehub.tools.telephony import send_dtmf_tool
from voicehub.workers.job import DeskJob
from voicehub.workers.load import CallLoad
from voicehub_dev.fakes.livekit_room import StandInRoom
from voicehub_dev.fakes.livekit_server import FakeLiveKitServer
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"
NUMBER = "+15551234567"
NUMBER_KEY = b"k" * 32
TRUNK = "ST_outbound"


def triage_desk(trunk: str | None = TRUNK) -> Desk:
    config = load_desk_folder(CHANNELS)["triage"]
    assert config.transfer is not None
    transfer = config.transfer.model_copy(update={"sip_trunk": trunk})
    return build_desk(config.model_copy(update={"transfer": transfer}))


class Job:
    """A desk job in a stand-in room, its SIP controls on the fake LiveKit server."""

    def __init__(self, hub: Hub, livekit: FakeLiveKitServer, desk: Desk) -> None:
        self.hub, self.livekit, self.desk = hub, livekit, desk
        self.room, self.factory, self.clock = StandInRoom(), ScriptedStack(), VirtualClock()
        self.tones: list[tuple[int, str]] = []
        access = SipAccess(livekit.url, livekit.api_key, livekit.api_secret)

        async def publish_dtmf(code: int, digit: str) -> None:
            self.tones.append((code, digit))

        controls = SipControls(
            room_name="triage-room-1", access=access, publish_dtmf=publish_dtmf, clock=self.clock
        )
        calls = CallLifecycle(hub, {desk.name: desk}, self.factory)
        self.job = DeskJob(
            calls, desk, self.room, CallLoad(2), number_key=NUMBER_KEY, controls=controls
        )
        self.runner: asyncio.Task[None] | None = None

    async def caller(self, kind: str = "sip") -> ScriptedSession:
        attributes = {"sip.phoneNumber": NUMBER, "sip.callID": "SCL_1"} if kind == "sip" else {}
        count = len(self.factory.sessions)
        self.room.join(f"{kind}-caller", kind=kind, attributes=attributes)
        await self.room.changes.wait_for(lambda: len(self.factory.sessions) > count)
        session = self.factory.sessions[-1]
        greeted = lambda: session.said and not agent_busy(session.activity.snapshot())  # noqa: E731
        await until(greeted, self)  # the greeting, heard
        return session

    def play(self) -> None:
        for audio in self.room.audio:
            audio.sink.play_all()

    async def keep_playing(self) -> None:
        """The caller's phone plays whatever the agent says (its briefing, its notices)."""
        while True:
            await self.room.changes.wait_for(self._queued, timeout=3600)
            self.play()

    async def played(self, job: Any) -> Any:
        """Run `job` (something the agent says), the caller hearing it all."""
        task = asyncio.ensure_future(job)
        while not task.done():
            self.play()
            await self.room.changes.wait_for(lambda: task.done() or self._queued())
        return task.result()

    def _queued(self) -> bool:
        return any(audio.sink.queued for audio in self.room.audio)

    async def use(self, tool: Any, session: ScriptedSession, **arguments: Any) -> Any:
        """The triage agent calls `tool`, says its answer, and falls quiet."""
        context = ToolContext(hub=self.hub, room_id=session.room_id, agent_id="triage")
        result = await tool.invoke(arguments, context)
        await self.played(session.say(result.data["say"]))
        await self.clock.advance(1.0)
        return result.data

    def tool(self, name: str) -> Any:
        [found] = [t for t in self.desk.agents["triage"].tools if t.name == name]
        return found


@pytest_asyncio.fixture
async def livekit() -> AsyncIterator[FakeLiveKitServer]:
    server = FakeLiveKitServer()
    await server.start()
    yield server
    await server.aclose()


@pytest_asyncio.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    hub = Hub(store=SQLiteStore(tmp_path / "worker.db"), orchestration=None)
    await hub.start()
    yield hub
    await hub.aclose()


@pytest_asyncio.fixture
async def job(hub: Hub, livekit: FakeLiveKitServer) -> AsyncIterator[Job]:
    found = Job(hub, livekit, triage_desk())
    found.runner = asyncio.create_task(found.job.run())
    player = asyncio.create_task(found.keep_playing())
    yield found
    for task in (found.runner, player):
        task.cancel()
    await asyncio.gather(found.runner, player, return_exceptions=True)


async def until(predicate: Any, job: Job) -> None:
    async def check() -> None:
        while not predicate():
            job.play()
            await job.room.changes.wait_for(lambda: predicate() or job._queued())

    await asyncio.wait_for(check(), 10)


async def transfers_of(hub: Hub, room_id: str) -> list[dict[str, Any]]:
    record = await hub.store.get_room(room_id)
    assert record is not None
    found: list[dict[str, Any]] = record.metadata.get("transfers", [])
    return found


async def test_a_warm_transfer_calls_the_person_in_briefs_them_and_leaves(job: Job) -> None:
    session = await job.caller()
    said = await job.use(job.tool("transfer_call"), session, target="billing", summary="A refund")
    assert said["say"] == "Please hold while I call billing for you."
    assert job.runner is not None
    await asyncio.wait_for(asyncio.shield(job.runner), 10)  # the agent's part is over
    [(method, create)] = job.livekit.sip_requests
    assert method == "CreateSIPParticipant"
    assert (create.sip_trunk_id, create.sip_call_to, create.room_name) == (
        TRUNK,
        "+15550100300",
        "triage-room-1",
    )
    assert create.wait_until_answered and create.play_dialtone  # a dial tone while it rings
    assert create.ringing_timeout.seconds == 20
    assert create.participant_identity.startswith("transfer-")
    assert session.said[-1] == (
        "Hello, this is the Help desk, with a caller for you. They said: A refund. "
        "Connecting you now."
    )
    assert job.job.handed_over and job.runner.exception() is None  # the agent left the room
    [transfer] = await transfers_of(job.hub, session.room_id)
    assert (transfer["target"], transfer["mode"], transfer["outcome"]) == (
        "billing",
        "warm",
        "connected",
    )


async def test_a_cold_transfer_refers_the_call(job: Job) -> None:
    session = await job.caller()
    said = await job.use(job.tool("transfer_call"), session, target="billing", mode="cold")
    assert said["say"] == "I'm putting you through to billing now."
    assert job.runner is not None
    await asyncio.wait_for(asyncio.shield(job.runner), 10)
    [(method, refer)] = job.livekit.sip_requests
    assert method == "TransferSIPParticipant"
    assert (refer.room_name, refer.participant_identity, refer.transfer_to) == (
        "triage-room-1",
        "sip-caller",
        "tel:+15550100300",
    )
    assert [t["outcome"] for t in await transfers_of(job.hub, session.room_id)] == ["connected"]


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [("busy", "the line at billing is busy"), ("no-answer", "nobody at billing answered")],
)
async def test_nobody_answering_keeps_the_caller_with_the_agent(
    job: Job, outcome: str, reason: str
) -> None:
    session = await job.caller()
    job.livekit.sip_outcomes.append(outcome)
    await job.use(job.tool("transfer_call"), session, target="billing")
    told = f"Sorry, {reason}. I can take a message for them, or help you with something else."
    await until(lambda: told in session.said, job)
    assert job.runner is not None and not job.runner.done() and not job.job.handed_over
    [transfer] = await transfers_of(job.hub, session.room_id)
    assert transfer["outcome"] == outcome and "SIP call failed" in transfer["detail"]
    taken = await job.use(job.tool("take_message"), session, message="Call me back, please.")
    assert taken["say"] == "I've taken your message for billing. They will get back to you."


async def test_keypad_tones_go_out_as_sip_dtmf(job: Job) -> None:
    session = await job.caller()
    said = await job.use(send_dtmf_tool(), session, digits="1w*D")
    assert said["say"] == "Pressing 1 * D."
    for _ in range(4):  # the tones go one after the other, on the virtual clock
        await job.clock.advance(0.5)
    assert job.tones == [(1, "1"), (10, "*"), (15, "D")]


async def test_what_a_livekit_line_cannot_do_is_refused(
    hub: Hub, livekit: FakeLiveKitServer
) -> None:
    no_trunk = Job(hub, livekit, triage_desk(trunk=None))
    runner = asyncio.create_task(no_trunk.job.run())
    try:
        session = await no_trunk.caller()
        refused = await no_trunk.use(no_trunk.tool("transfer_call"), session, target="billing")
        assert refused["status"] == "refused"
        assert "this desk names none ([transfer] sip_trunk)" in refused["error"]
        no_trunk.room.leave("sip-caller")
        app = await no_trunk.caller(kind="standard")  # an app user: no phone line
        refused = await no_trunk.use(no_trunk.tool("transfer_call"), app, target="billing")
        assert refused["error"].startswith("this caller is not on a phone line")
        refused = await no_trunk.use(send_dtmf_tool(), app, digits="1")
        assert refused["status"] == "refused" and livekit.sip_requests == []
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
