"""Two `voicehub serve` processes on one Redis, called over real sockets with synthesized
speech (the WebSocket client of `voicehub call`): a result is heard once, whichever
instance the caller reaches, when an instance is killed mid-speech or mid-task, when two
connections race for the conversation, and across a Redis restart (AOF on).

The module's pair of instances (A and B) serves every test, each test in a conversation of
its own: an instance a test killed is started again, under a new id, before the next test
(a start costs about 13 s of CPU: the models load). Waits are on what can be observed (call
events, API records), bounded by generous deadlines that only a broken run reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import redis

from tests.server.instance_processes import ServeProcess, write_channels
from tests.server.test_e2e import (
    HEAT_PUMP_WORDS,
    RESEARCH,
    heard_keywords,
    recognized,
    result_segments,
)
from tests.support.speech import spoken
from tests.support.waiting import until
from voicehub.client.call import CallClient, CallOptions
from voicehub.client.report import CallReport
from voicehub.orchestration.recovery import LOST_REASON
from voicehub.voice.events import DeliveryAttempt, DeliveryOutcome, TaskFinished, TaskStarted
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, RecordedRequest, Reply, Stall, Step
from voicehub_dev.fakes.redis_server import RedisServer, running_redis

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.realtime]

MODEL_ANSWER = "Heat pumps cut heating bills, the model says."


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A Redis of this module's own (test (d) restarts it)."""
    with running_redis("voicehub-redis-two-") as server:
        client = redis.Redis.from_url(server.url)
        client.flushall()
        client.close()
        yield server


@pytest.fixture(scope="module")
def speech() -> bytes:
    return spoken(RESEARCH)


class Model:
    """The fake model analyst-b of `research-slow` and `research-strict` asks, for the
    module; each test sets its script and counts the requests made since (`asked`)."""

    def __init__(self) -> None:
        self.server = FakeOpenAIServer(self._step, api_key="sk-test-fake")
        self.script: Any = None
        self.since = 0

    def begin(self, script: Any) -> None:
        self.script, self.since = script, len(self.server.requests)

    @property
    def asked(self) -> list[RecordedRequest]:
        found: list[RecordedRequest] = self.server.requests[self.since :]
        return found

    def _step(self, request: RecordedRequest) -> Step:
        assert self.script is not None, "a desk asked the model in a test that set no script"
        step: Step = self.script(request)
        return step


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model() -> AsyncIterator[Model]:
    fake = Model()
    async with fake.server:
        yield fake


class Pair:
    """Instances A and B of the module, on its Redis, serving the desks of `write_channels`
    (with the module's fake model)."""

    def __init__(self, redis_url: str, folder: Path, model_url: str) -> None:
        self.redis_url, self.folder = redis_url, folder
        self.channels = write_channels(folder / "channels", model_url)
        self.instances: dict[str, ServeProcess] = {}

    async def running(self) -> tuple[ServeProcess, ServeProcess]:
        """A and B, each started (under a new id) if it is not running: one a test killed
        stays dead, as a crashed machine."""
        starting = []
        for letter in "ab":
            instance = self.instances.get(letter)
            if instance is None or instance.process is None or instance.process.poll() is not None:
                name = f"{letter}-{uuid.uuid4().hex[:6]}"
                instance = ServeProcess(name, self.redis_url, self.channels, self.folder)
                self.instances[letter] = instance
                starting.append(instance)
        await asyncio.gather(*(instance.start() for instance in starting))
        return self.instances["a"], self.instances["b"]

    def stop(self) -> None:
        for instance in self.instances.values():
            instance.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pair(
    redis_server: RedisServer, model: Model, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pair]:
    instances = Pair(redis_server.url, tmp_path_factory.mktemp("two"), model.server.base_url)
    try:
        yield instances
    finally:
        instances.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def two(pair: Pair) -> AsyncIterator[tuple[ServeProcess, ServeProcess]]:
    """A and B running for this test; their logs printed after it (they tell why, when a
    test failed)."""
    a, b = await pair.running()
    marks = {instance.name: len(instance.log()) for instance in (a, b)}
    yield a, b
    for instance in (a, b):
        print(f"--- {instance.name} ---\n{instance.log()[marks[instance.name] :][-4000:]}")


def options(instance: ServeProcess, conversation: str, desk: str = "research") -> CallOptions:
    return CallOptions(
        desk=desk, server=instance.url, conversation=conversation, playout_speed=16.0, quiet=0.5
    )


async def deliveries(instance: ServeProcess, room: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await instance.get("/api/deliveries", room=room))["deliveries"]
    return found


async def tasks(instance: ServeProcess, room: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await instance.get("/api/tasks", room=room))["tasks"]
    return found


@contextlib.asynccontextmanager
async def research_call(
    instance: ServeProcess, conversation: str, speech: bytes, desk: str = "research"
) -> AsyncIterator[CallClient]:
    """A call to `instance` whose caller, once greeted, asks for research and stays on the
    line; closed on leaving the block (if the server has not closed it first)."""
    async with CallClient(options(instance, conversation, desk)) as call:
        await call.wait_for_turn()
        await call.say(speech, RESEARCH)
        yield call


async def delegate_and_hang_up(instance: ServeProcess, conversation: str, speech: bytes) -> None:
    """A call that asks for research and hangs up as soon as the work is done, before the
    agent has even finished its answer: the result is held."""
    async with research_call(instance, conversation, speech) as call:
        await call.wait_for(lambda: len(call.report.events_of(TaskFinished)) == 2, 90)
        await call.hangup()
    assert call.report.events_of(DeliveryAttempt) == []


async def kill_under(instance: ServeProcess, call: CallClient) -> None:
    """SIGKILL `instance` while `call` is on it; returns once the caller's line dropped."""
    instance.kill()
    await call.wait_for(lambda: call.closed, 30)


async def call_back(
    instance: ServeProcess, conversation: str, desk: str = "research", timeout: float = 90
) -> tuple[CallReport, DeliveryOutcome]:
    """Call `conversation` again through `instance`: the result delivered there, once the
    call has settled."""
    async with CallClient(options(instance, conversation, desk)) as back:
        told = await back.wait_for_event(
            DeliveryOutcome, lambda e: e.outcome == "delivered", timeout
        )
        assert await back.settle(60)
    return back.report, told


def delivered(report: CallReport) -> list[DeliveryOutcome]:
    return [e for e in report.events_of(DeliveryOutcome) if e.outcome == "delivered"]


async def check_heard_once(report: CallReport, delivery_id: str) -> None:
    assert [e.delivery_id for e in delivered(report)] == [delivery_id]
    segments = result_segments(report, delivery_id)
    heard_keywords(await recognized(report, segments), HEAT_PUMP_WORDS, at_least=3)


async def test_a_caller_who_hung_up_on_a_calls_back_through_b_and_hears_it_once(
    two: tuple[ServeProcess, ServeProcess], speech: bytes
) -> None:
    conversation, room = "two-back", "research:two-back"
    a, b = two
    await delegate_and_hang_up(a, conversation, speech)

    async def held() -> list[dict[str, Any]]:
        found = await deliveries(b, room)  # B reads what A stored
        return found if found and found[0]["status"] == "held" else []

    [waiting] = await until(held, what="the result held in Redis")
    back, _ = await call_back(b, conversation)
    assert back.resumed
    await check_heard_once(back, waiting["id"])
    [done] = await deliveries(a, room)
    assert (done["status"], done["attempts"]) == ("delivered", 1)


async def test_a_killed_while_speaking_the_caller_hears_the_result_once_through_b(
    two: tuple[ServeProcess, ServeProcess], speech: bytes
) -> None:
    conversation, room = "two-kill", "research:two-kill"
    a, b = two
    async with research_call(a, conversation, speech) as call:
        attempt = await call.wait_for_event(DeliveryAttempt, timeout=90)
        started = next(r.at for r in call.report.events if r.event is attempt)
        # A is speaking the result: its audio is arriving
        await call.wait_for(
            lambda: any(s.first_audio_at >= started for s in call.report.segments), 30
        )
        await kill_under(a, call)
    assert delivered(call.report) == []
    [cut] = await deliveries(b, room)
    assert (cut["status"], cut["lease_owner"]) == ("delivering", a.name)

    back, _ = await call_back(b, conversation)
    await check_heard_once(back, cut["id"])
    [done] = await deliveries(b, room)
    # A's cut attempt counts; B spoke it after A's lease ran out
    assert (done["status"], done["attempts"]) == ("delivered", 2)


async def test_two_connections_racing_for_one_conversation_leave_one_call_and_speak_it_once(
    two: tuple[ServeProcess, ServeProcess], speech: bytes
) -> None:
    conversation, room = "two-race", "research:two-race"
    a, b = two
    await delegate_and_hang_up(a, conversation, speech)

    async def held() -> list[dict[str, Any]]:
        found = await deliveries(a, room)
        return found if found and found[0]["status"] == "held" else []

    [waiting] = await until(held, what="the result held")
    # The same conversation called on both instances at once: the call record lets one
    # call live; the other connection is replaced (4409), wherever it was.
    on_a, on_b = CallClient(options(a, conversation)), CallClient(options(b, conversation))
    await asyncio.gather(on_a.connect(), on_b.connect(), return_exceptions=True)
    try:
        await on_a.wait_for(lambda: on_a.closed or on_b.closed, 30)
        [winner] = [c for c in (on_a, on_b) if not c.closed]
        [loser] = [c for c in (on_a, on_b) if c.closed]
        await winner.wait_for(lambda: bool(delivered(winner.report)), 90)
        await winner.settle(60)
    finally:
        await asyncio.gather(on_a.hangup(), on_b.hangup())
    await check_heard_once(winner.report, waiting["id"])
    assert loser.report.close_code == 4409
    assert loser.report.events_of(DeliveryOutcome) == [] and loser.report.segments == []
    [done] = await deliveries(b, room)
    assert (done["status"], done["attempts"]) == ("delivered", 1)


async def test_a_redis_restart_mid_call_loses_nothing(
    redis_server: RedisServer, two: tuple[ServeProcess, ServeProcess], speech: bytes
) -> None:
    conversation, room = "two-redis", "research:two-redis"
    a, b = two
    async with research_call(a, conversation, speech) as call:
        [stored] = await until(lambda: deliveries(b, room), what="the result stored")
        before = (await a.get(f"/api/rooms/{room}/events", limit="1000"))["events"]
        await asyncio.to_thread(redis_server.restart)  # AOF replayed at start
        await call.wait_for_event(DeliveryOutcome, lambda e: e.outcome == "delivered", 90)
        assert await call.settle(60)
    await check_heard_once(call.report, stored["id"])
    after = (await b.get(f"/api/rooms/{room}/events", limit="1000"))["events"]
    assert [e["id"] for e in before] == [e["id"] for e in after][: len(before)]
    [done] = await deliveries(b, room)
    assert (done["status"], done["attempts"]) == ("delivered", 1)
    assert [t["status"] for t in await tasks(b, room)] == ["ok", "ok"]


@pytest.mark.parametrize(
    ("desk", "policy"), [("research-slow", "retry"), ("research-strict", "fail")]
)
async def test_an_instance_killed_while_its_workers_run_is_taken_over_and_the_caller_told(
    two: tuple[ServeProcess, ServeProcess],
    model: Model,
    speech: bytes,
    desk: str,
    policy: str,
) -> None:
    def script(request: RecordedRequest) -> Step:
        # The first question (on A) never gets an answer: A is killed while it waits.
        return Stall() if len(model.asked) == 1 else Reply(text=(MODEL_ANSWER,))

    conversation = f"two-lost-{policy}"
    room = f"{desk}:{conversation}"
    model.begin(script)
    a, b = two
    async with research_call(a, conversation, speech, desk) as call:
        await call.wait_for(lambda: len(call.report.events_of(TaskStarted)) == 2, 90)
        await call.wait_for(lambda: len(call.report.events_of(TaskFinished)) == 1, 90)
        await until(lambda: bool(model.asked), what="analyst-b asking")
        await kill_under(a, call)

    back, told = await call_back(b, conversation, desk, timeout=120)
    found = await tasks(b, room)
    assert [e.delivery_id for e in delivered(back)] == [told.delivery_id]
    lost = next(t for t in found if t["agent_id"] == "analyst-b")
    assert (lost["status"], lost["owner"], lost["reason"]) == ("failed", b.name, LOST_REASON)
    if policy == "retry":
        assert told.text.startswith("I had to restart the work on heat pumps")
        assert told.text.endswith(MODEL_ANSWER)
        rerun = found[-1]
        assert (rerun["agent_id"], rerun["status"], rerun["owner"]) == ("analyst-b", "ok", b.name)
        assert len(model.asked) == 2
    else:
        assert told.text.startswith("I'm sorry: the work on heat pumps was lost")
        assert f"analyst-b failed: {LOST_REASON}" in told.text
        assert len(found) == 2 and len(model.asked) == 1
    assert "heat" in told.text and "pump" in told.text  # analyst-a's answer is kept
    assert result_segments(back, str(told.delivery_id)), "the caller heard nothing"
