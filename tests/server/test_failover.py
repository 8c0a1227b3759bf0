"""A live call outlives its server: real `voicehub serve` processes on one real redis-server,
behind a load balancer, called with synthesized speech. The caller asks for research; the
instance carrying the call is drained (it hands the call over at a quiet moment), then the
instance that took it over is SIGKILLed while it speaks the result: the caller keeps
talking, hears "sorry, I lost you for a moment" from a third instance, and hears the result
once, in full.

One test per transport: the WebSocket client of `voicehub call` (it reconnects through the
balancer) and a Twilio-protocol caller (it follows the TwiML's `<Redirect>` as Twilio does).
The module's instances are started together and shared; each test uses three of them.
Waits are on what can be observed (call events, audio, records), bounded by deadlines only a
broken run reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import redis

from tests.fakes.redis_server import RedisServer, running_redis
from tests.server.instance_processes import ServeProcess, eventually, write_channels
from tests.server.test_e2e import HEAT_PUMP_WORDS, RESEARCH, heard_keywords, recognized
from voicehub.bench.balancer import Balancer
from voicehub.client.call import CallClient, CallOptions, caller_audio
from voicehub.client.reconnect import Backoff
from voicehub.client.report import format_timeline
from voicehub.client.twilio import TwilioCaller
from voicehub.client.twilio_call import TwilioCall
from voicehub.core.store.base import CallRecord, DeliveryStatus
from voicehub.core.store.redis import RedisStore
from voicehub.desks.call_resume import APOLOGY
from voicehub.voice.audio import resample_pcm16
from voicehub.voice.events import (
    CallSession,
    DeliveryAttempt,
    DeliveryOutcome,
    TaskFinished,
    TaskStarted,
    Transcript,
)
from voicehub.voice.providers.offline import transcribe

pytestmark = pytest.mark.asyncio(loop_scope="module")

AUTH_TOKEN = "twilio-auth-token-for-tests"
PUBLIC_URL = "https://voicehub.test"


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis("voicehub-redis-failover-") as server:
        yield server


@pytest.fixture(scope="module")
def speech() -> bytes:
    return caller_audio(text=RESEARCH)


class Fleet:
    """The module's instances, the balancer in front of them, and the store they share."""

    def __init__(self, redis_url: str, folder: Path) -> None:
        self.redis_url = redis_url
        self.folder = folder
        self.channels = write_channels(folder / "channels")
        self.instances: list[ServeProcess] = []
        self.balancer: Balancer | None = None
        self.store = RedisStore(redis_url)

    def spawn(self, count: int) -> list[ServeProcess]:
        suffix = uuid.uuid4().hex[:6]
        made = [
            ServeProcess(
                f"i{len(self.instances) + n}-{suffix}",
                self.redis_url,
                self.channels,
                self.folder,
                "--log-level",
                "info",
                "--drain-seconds",
                "60",
                "--public-url",
                PUBLIC_URL,
                env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN},
            )
            for n in range(count)
        ]
        self.instances += made
        return made

    def named(self, name: str) -> ServeProcess:
        return next(i for i in self.instances if i.name == name)

    async def owner(self, room_id: str, *, not_: str = "") -> ServeProcess:
        """The instance the call record names (once it is not `not_`)."""

        async def found() -> CallRecord | None:
            record = await self.store.get_call(room_id)
            return record if record is not None and record.owner not in ("", not_) else None

        record: CallRecord = await eventually(found, what=f"the call of {room_id} taken")
        return self.named(record.owner)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fleet(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Fleet]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    fleet = Fleet(redis_server.url, tmp_path_factory.mktemp("failover"))
    started = fleet.spawn(5)  # three for the first test; the second reuses one, adds two
    try:
        await asyncio.gather(*(instance.start() for instance in started))
        async with Balancer([i.url for i in started], interval=0.05) as balancer:
            fleet.balancer = balancer
            await balancer.check()
            yield fleet
    finally:
        for instance in fleet.instances:
            instance.stop()
        await fleet.store.close()
        for instance in fleet.instances:  # the logs tell why, when a test failed
            print(f"--- {instance.name} ---\n{instance.log()[-6000:]}")


@contextlib.asynccontextmanager
async def only(fleet: Fleet, *instances: ServeProcess) -> AsyncIterator[None]:
    """Let the balancer reach only `instances` during the block (the others idle)."""
    balancer = fleet.balancer
    assert balancer is not None
    kept = balancer.backends
    balancer.backends = [b for b in kept if any(i.url.endswith(f":{b.port}") for i in instances)]
    balancer.ready = [True] * len(balancer.backends)
    try:
        yield
    finally:
        balancer.backends = kept
        balancer.ready = [True] * len(kept)


def _attempted_after(call: CallClient, index: int) -> float | None:
    """When the first delivery attempt among the events after `index` arrived."""
    for received in call.report.events[index:]:
        if isinstance(received.event, DeliveryAttempt):
            return received.at
    return None


@contextlib.asynccontextmanager
async def timeline(call: CallClient) -> AsyncIterator[None]:
    """Print the call's timeline when the block fails (what the caller heard and when)."""
    try:
        yield
    except BaseException:
        print(format_timeline(call.report))
        raise


async def deliveries(fleet: Fleet, room_id: str) -> list[DeliveryStatus]:
    return [d.status for d in await fleet.store.list_deliveries(room_id=room_id)]


async def test_a_websocket_call_goes_on_through_a_drain_and_a_kill_and_hears_its_result_once(
    fleet: Fleet, speech: bytes
) -> None:
    conversation, room = "fo-ws", "research:fo-ws"
    assert fleet.balancer is not None
    options = CallOptions(
        desk="research",
        server=fleet.balancer.url,
        conversation=conversation,
        playout_speed=16.0,
        quiet=0.5,
        reconnect=Backoff(first=0.05, give_up_after=60),
    )
    async with only(fleet, *fleet.instances[:3]), CallClient(options) as call, timeline(call):
        await call.wait_for_turn()
        await call.say(speech, RESEARCH)
        await call.wait_for(lambda: len(call.report.events_of(TaskStarted)) == 2, 90)
        first = await fleet.owner(room)

        first.drain()  # it hands the call over at its next quiet moment, then exits
        second = await fleet.owner(room, not_=first.name)
        await call.wait_for(lambda: len(call.report.events_of(CallSession)) == 2, 60)
        assert call.report.events_of(CallSession)[1].continued == "handover"
        handed_over = len(call.report.events)

        # the second instance speaks the result; it is killed while it does
        await call.wait_for(lambda: _attempted_after(call, handed_over) is not None, 120)
        started = _attempted_after(call, handed_over)
        assert started is not None
        await call.wait_for(
            lambda: any(s.first_audio_at >= started for s in call.report.segments), 60
        )
        second.kill()  # mid-delivery
        third = await fleet.owner(room, not_=second.name)
        await call.wait_for(lambda: len(call.report.events_of(CallSession)) == 3, 30)
        resumed = call.report.events_of(CallSession)[2]
        assert resumed.continued == "failover"
        told = await call.wait_for_event(
            DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=90
        )
        assert await call.settle(60)
        await call.hangup()
        assert await first.exited() == 0  # drained: its workers' results are in the store

    report = call.report
    assert [h.code for h in call.reconnector.history] == [1012, 1006]  # type: ignore[union-attr]
    apology = [e for e in report.events_of(Transcript) if e.text == APOLOGY]
    assert len(apology) == 1  # only the kill cut the caller off; the hand-over was seamless
    delivered = [e for e in report.events_of(DeliveryOutcome) if e.outcome == "delivered"]
    assert [e.delivery_id for e in delivered] == [told.delivery_id]
    assert len(report.events_of(TaskFinished)) == 2
    # the result as heard after the kill, from its start
    outcome_at = next(r.at for r in report.events if r.event is told)
    last_attempt = max(
        r.at
        for r in report.events
        if isinstance(r.event, DeliveryAttempt) and r.event.delivery_id == told.delivery_id
    )
    segments = [s for s in report.segments if last_attempt <= s.first_audio_at <= outcome_at]
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=3)
    record = await fleet.store.get_delivery(str(told.delivery_id))
    assert record is not None
    assert (record.status, record.attempts, record.lease_owner) == (
        DeliveryStatus.DELIVERED,
        2,  # cut by the kill, then spoken in full
        "",
    )
    assert third.name not in (first.name, second.name)


async def test_a_phone_call_goes_on_through_a_drain_and_a_kill_and_hears_its_result_once(
    fleet: Fleet, speech: bytes
) -> None:
    live = [i for i in fleet.instances if i.process is not None and i.process.poll() is None]
    assert len(live) >= 3, [i.name for i in live]
    assert fleet.balancer is not None
    caller = TwilioCaller(fleet.balancer.url, PUBLIC_URL, AUTH_TOKEN)
    call = TwilioCall(caller, playout_speed=16.0)
    async with only(fleet, *live[-3:]):
        await call.dial("research", "+15550100077")
        try:
            room = f"research:{call.line.answer.parameters['conversation']}"
            await call.line.wait_quiet(0.5, timeout=60)  # the greeting
            await call.say(speech)

            async def delegated() -> bool:
                return len(await fleet.store.list_tasks(parent_room_id=room)) == 2

            await eventually(delegated, what="the research delegated", seconds=90)
            first = await fleet.owner(room)
            first.drain()
            second = await fleet.owner(room, not_=first.name)
            await call.wait_for_stream(1)
            assert call.legs[0].closed_at is not None

            async def speaking() -> bool:
                found = await fleet.store.list_deliveries(room_id=room)
                return bool(found) and found[0].status is DeliveryStatus.DELIVERING

            await eventually(speaking, what="the result being spoken", seconds=120)
            frames = call.line.media_frames()

            async def its_audio() -> bool:  # the result's first audio reached the phone
                return call.line.media_frames() > frames

            await eventually(its_audio, what="the result's audio", seconds=60)
            second.kill()
            await call.wait_for_stream(2)
            start = len(call.line.played.pcm16)  # what played before the third stream
            third = await fleet.owner(room, not_=second.name)

            async def delivered() -> bool:
                found = await fleet.store.list_deliveries(room_id=room)
                return bool(found) and found[0].status is DeliveryStatus.DELIVERED

            await eventually(delivered, what="the result delivered", seconds=120)
            await call.line.wait_quiet(1.0, timeout=60)
        finally:
            await call.hang_up()
        assert await first.exited() == 0

    assert not call.line.problems, call.line.problems
    assert len(call.legs) == 3 and third.name not in (first.name, second.name)
    [record] = await fleet.store.list_deliveries(room_id=room)
    assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 2)
    # after the kill: the apology, then the result from its start (20 s of 8 kHz audio)
    after_kill = bytes(call.line.played.pcm16[start : start + 20 * 16000])
    heard = await asyncio.to_thread(transcribe, resample_pcm16(after_kill, 8000, 16000), 16000)
    said = [e.text for e in await fleet.store.list_events(room) if e.role == "assistant"]
    assert said.count(APOLOGY) == 1, said  # the kill cut the caller off; the hand-over did not
    # what the phone's recognizer made of the request decides the result's words: the
    # caller hears the result as stored, from its start
    words = {w.strip(".,:;!?'").lower() for w in record.content.split()[:12]}
    heard_keywords(heard, tuple(sorted(w for w in words if len(w) >= 4)), at_least=3)
