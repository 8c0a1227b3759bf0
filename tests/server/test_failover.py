"""A live call outlives its server: three real `voicehub serve` processes on one real
redis-server, behind a load balancer, called with synthesized speech by a WebSocket caller
(the client of `voicehub call`, which reconnects through the balancer) and a Twilio-protocol
caller (which follows the TwiML's `<Redirect>` as Twilio does), both at once. Each asks for
research; analyst-b's model does not answer yet when the instance carrying both calls is
SIGKILLed (mid-tool). Both callers keep talking: the second instance takes them up ("sorry,
I lost you for a moment"), and is drained right away: it hands both calls over, at a quiet
moment, to the third, without a word. Meanwhile a sweep takes the killed instance's work
over (analyst-b asks again and is answered), and each caller hears their result once.

Mid-delivery kills (a result cut and spoken again from its start) are in the fail-over
bench (`voicehub bench --only failover`) and the call book's unit tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.server.instance_processes import ServeProcess, write_channels
from tests.server.test_e2e import HEAT_PUMP_WORDS, RESEARCH, heard_keywords
from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.client.call import CallClient, CallOptions
from voicehub.client.reconnect import Backoff
from voicehub.client.report import AgentSegment, CallReport, format_timeline
from voicehub.client.twilio import TwilioCaller
from voicehub.client.twilio_call import TwilioCall
from voicehub.core.store.base import CallRecord, DeliveryRecord, DeliveryStatus, TaskStatus
from voicehub.core.store.redis import RedisStore
from voicehub.desks.call_resume import APOLOGY
from voicehub.orchestration.recovery import LOST_REASON
from voicehub.voice.audio import resample_pcm16
from voicehub.voice.events import (
    CallSession,
    DeliveryAttempt,
    DeliveryOutcome,
    TaskStarted,
    Transcript,
)
from voicehub.voice.providers.offline import transcribe
from voicehub_dev.fakes.balancer import Balancer
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, RecordedRequest, Reply, Stall, Step
from voicehub_dev.fakes.redis_server import RedisServer, running_redis

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

AUTH_TOKEN = "twilio-auth-token-for-tests"
PUBLIC_URL = "https://voicehub.test"
DESK = "research-slow"  # analyst-b asks the fake model
MODEL_ANSWER = "Heat pumps cut heating bills, the model says."
ANSWER_WORDS = ("bills", "model")  # the words at the very end of the result


def result_segments(report: CallReport, told: DeliveryOutcome) -> list[AgentSegment]:
    """The audio of the delivered result: what arrived between its last attempt event and
    its outcome (both travel on the line the audio did, before and after it)."""
    at = [r.at for r in report.events if r.event is told]
    attempts = [
        r.at
        for r in report.events
        if isinstance(r.event, DeliveryAttempt) and r.event.delivery_id == told.delivery_id
    ]
    assert at and attempts, "no attempt or outcome event for the delivered result"
    return [s for s in report.segments if attempts[-1] <= s.first_audio_at <= at[0]]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis("voicehub-redis-failover-") as server:
        yield server


class Fleet:
    """The instances, the balancer in front of them, and the store they share."""

    def __init__(self, redis_url: str, folder: Path, model_url: str) -> None:
        self.redis_url = redis_url
        self.folder = folder
        self.channels = write_channels(folder / "channels", model_url)
        suffix = uuid.uuid4().hex[:6]
        self.instances = [
            ServeProcess(
                f"{name}-{suffix}",
                redis_url,
                self.channels,
                folder,
                "--log-level",
                "info",
                "--drain-seconds",
                "60",
                "--public-url",
                PUBLIC_URL,
                env={"TWILIO_AUTH_TOKEN": AUTH_TOKEN},
            )
            for name in "abc"
        ]
        self.store = RedisStore(redis_url)
        self.balancer = Balancer([])

    def named(self, name: str) -> ServeProcess:
        return next(i for i in self.instances if i.name == name)

    def only(self, instance: ServeProcess) -> None:
        """New connections through the balancer reach `instance` only."""
        self.balancer.backends = [urlsplit(instance.url)]
        self.balancer.ready = [True]

    async def owner(self, room_id: str, *, not_: str = "") -> ServeProcess:
        """The instance the call record names (once it is not `not_`)."""

        async def found() -> CallRecord | None:
            record = await self.store.get_call(room_id)
            return record if record is not None and record.owner not in ("", not_) else None

        record: CallRecord = await until(found, what=f"the call of {room_id} taken up")
        return self.named(record.owner)


@contextlib.asynccontextmanager
async def running_fleet(redis_url: str, folder: Path, model_url: str) -> AsyncIterator[Fleet]:
    fleet = Fleet(redis_url, folder, model_url)
    try:
        await asyncio.gather(*(instance.start() for instance in fleet.instances))
        for instance in fleet.instances:
            fleet.balancer.add(instance.url)
        async with fleet.balancer:
            yield fleet
    finally:
        for instance in fleet.instances:
            instance.stop()
        await fleet.store.close()
        for instance in fleet.instances:  # the logs tell why, when the test failed
            print(f"--- {instance.name} ---\n{instance.log()[-5000:]}")


@contextlib.asynccontextmanager
async def timeline(call: CallClient) -> AsyncIterator[None]:
    """Print the call's timeline when the block fails (what the caller heard and when)."""
    try:
        yield
    except BaseException:
        print(format_timeline(call.report))
        raise


async def test_a_websocket_and_a_phone_call_go_on_through_a_kill_and_a_drain(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    def script(request: RecordedRequest) -> Step:
        # the two callers' first questions die with the instance they were asked on
        return Stall() if len(model.requests) <= 2 else Reply(text=(MODEL_ANSWER,))

    model = FakeOpenAIServer(script, api_key="sk-test-fake")
    speech = spoken(RESEARCH)
    async with model, running_fleet(redis_server.url, tmp_path, model.base_url) as fleet:
        a, b, c = fleet.instances
        fleet.only(a)
        options = CallOptions(
            desk=DESK,
            server=fleet.balancer.url,
            conversation="fo-ws",
            playout_speed=16.0,
            quiet=0.5,
            reconnect=Backoff(first=0.05, give_up_after=60),
        )
        phone = TwilioCall(
            TwilioCaller(fleet.balancer.url, PUBLIC_URL, AUTH_TOKEN), playout_speed=16.0
        )
        async with CallClient(options) as call, timeline(call):
            await phone.dial(DESK, "+15550100077")
            phone_room = f"{DESK}:{phone.line.answer.parameters['conversation']}"
            try:
                await asyncio.gather(call.wait_for_turn(), phone.line.wait_quiet(0.5, timeout=60))
                await asyncio.gather(call.say(speech, RESEARCH), phone.say(speech))

                async def both_asking() -> bool:  # analyst-b of each call waits on the model
                    return len(model.requests) == 2

                await until(both_asking, what="analyst-b asking, twice", timeout=120)
                assert len(call.report.events_of(TaskStarted)) == 2
                fleet.only(b)
                a.kill()  # mid-tool, both calls on it
                await call.wait_for(lambda: len(call.report.events_of(CallSession)) == 2, 60)
                await phone.wait_for_stream(1, timeout=60)
                assert await fleet.owner(phone_room, not_=a.name) is b

                fleet.only(c)
                b.drain()  # both calls handed over at a quiet moment
                await call.wait_for(lambda: len(call.report.events_of(CallSession)) == 3, 60)
                await phone.wait_for_stream(2, timeout=60)
                assert await fleet.owner(phone_room, not_=b.name) is c
                start = len(phone.line.played.pcm16)  # the phone's audio on the third instance

                told = await call.wait_for_event(
                    DeliveryOutcome, lambda e: e.outcome == "delivered", timeout=120
                )
                assert await call.settle(60)

                seen: list[DeliveryRecord] = []

                async def delivered() -> bool:
                    seen[:] = await fleet.store.list_deliveries(room_id=phone_room)
                    return [d.status for d in seen] == [DeliveryStatus.DELIVERED]

                try:
                    await until(delivered, what="the phone's result delivered", timeout=120)
                except AssertionError:
                    raise AssertionError(f"the phone's deliveries: {seen}") from None
                await phone.line.wait_quiet(1.0, timeout=60)
                await call.hangup()
            finally:
                await phone.hang_up()
            assert await b.exited() == 0  # drained: its work is in the store

        # the WebSocket caller: cut off once (the kill), handed over once (the drain)
        sessions = call.report.events_of(CallSession)
        assert [s.continued for s in sessions] == ["new", "failover", "handover"]
        assert [h.code for h in call.reconnector.history] == [1006, 1012]  # type: ignore[union-attr]
        assert [e.text for e in call.report.events_of(Transcript)].count(APOLOGY) == 1
        delivered_ids = [
            e.delivery_id
            for e in call.report.events_of(DeliveryOutcome)
            if e.outcome == "delivered"
        ]
        assert delivered_ids == [told.delivery_id]
        assert told.text is not None and told.text.endswith(MODEL_ANSWER)
        # the result as the caller heard it: all of it, acked, from its first words to the
        # model's answer at its end (the audio of the attempt that was delivered)
        segments = result_segments(call.report, told)
        assert segments and all(s.acked_at is not None and not s.cut for s in segments), segments
        audio = b"".join(call.report.segment_audio(s) for s in segments)
        result_heard = await asyncio.to_thread(transcribe, audio, 16000)
        heard_keywords(result_heard, HEAT_PUMP_WORDS, at_least=4)
        heard_keywords(result_heard, ANSWER_WORDS, at_least=1)

        # the phone caller: the same, by redirects
        assert len(phone.legs) == 3 and not phone.line.problems, phone.line.problems
        said = [e.text for e in await fleet.store.list_events(phone_room) if e.role == "assistant"]
        assert said.count(APOLOGY) == 1, said
        [record] = await fleet.store.list_deliveries(room_id=phone_room)
        assert (record.status, record.attempts) == (DeliveryStatus.DELIVERED, 1)
        assert record.content.endswith(MODEL_ANSWER)
        after = bytes(phone.line.played.pcm16[start : start + 30 * 16000])  # 8 kHz PCM16
        words = {w.strip(".,:;!?'").lower() for w in record.content.split()}
        heard_text = await asyncio.to_thread(transcribe, resample_pcm16(after, 8000, 16000), 16000)
        heard_keywords(heard_text, tuple(sorted(w for w in words if len(w) >= 5)), at_least=3)

        # the killed instance's work was taken over: analyst-b asked again and was answered
        for room in (f"{DESK}:fo-ws", phone_room):
            tasks = await fleet.store.list_tasks(parent_room_id=room)
            lost = next(t for t in tasks if t.agent_id == "analyst-b")
            assert (lost.status, lost.reason) == (TaskStatus.FAILED, LOST_REASON)
            assert (tasks[-1].agent_id, tasks[-1].status) == ("analyst-b", TaskStatus.OK)
        assert len(model.requests) == 4
