"""A LiveKit job killed mid-call is taken up by another worker: two real livekit-agents
workers (built by `voicehub worker`'s code) on the fake LiveKit server and a real Redis. The
first runs as a process of its own; its job has a caller in the room and research running
(analyst-b waits on a model that does not answer yet) when the test SIGKILLs it. The second
worker's standby runtime finds the job's instance lost, takes its tasks over (analyst-b runs
again, now answered), sees through LiveKit's API that the caller is still in the room and
dispatches the agent to it; the new job serves the caller on the same conversation: "sorry,
I lost you for a moment", then the research result.

Jobs run in threads (livekit's thread executor) on stand-in rooms with the scripted session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.instance_processes import (
    FAKE_KEY,
    FAKE_KEY_ENV,
    REPO,
    write_channels,
)
from tests.support.waiting import until
from tests.workers.worker_process import API_KEY, API_SECRET, OneCaller, settings
from voicehub.core.store.base import CallState, TaskStatus
from voicehub.core.store.redis import RedisStore
from voicehub.desks.call_resume import APOLOGY
from voicehub.orchestration.recovery import LOST_REASON
from voicehub.workers.job import CallRoom
from voicehub.workers.server import build_server, standby_runtime
from voicehub_dev.fakes.livekit_server import FakeLiveKitServer
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, RecordedRequest, Reply, Stall, Step
from voicehub_dev.fakes.redis_server import RedisServer, running_redis
from voicehub_dev.fakes.server_session import ScriptedStack

# real-time end to end: `make test` runs it, `make check` does not
pytestmark = pytest.mark.realtime

MODEL_ANSWER = "Heat pumps cut heating bills, the model says."
ROOM_NAME = "lk-room-failover"
CONVERSATION_ROOM = "research-slow:alice"


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis("voicehub-redis-lk-failover-") as server:
        yield server


@contextlib.contextmanager
def worker_process(
    livekit: FakeLiveKitServer, redis_url: str, channels: Path, name: str, log: Path
) -> Iterator[subprocess.Popen[str]]:
    command = [sys.executable, "-m", "tests.workers.worker_process"]
    command += [livekit.url, redis_url, str(channels), name]
    env = {**os.environ, FAKE_KEY_ENV: FAKE_KEY, "HF_HUB_OFFLINE": "1"}
    with log.open("a") as errors:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


@contextlib.asynccontextmanager
async def in_process_worker(
    livekit: FakeLiveKitServer, redis_url: str, channels: Path, name: str
) -> AsyncIterator[list[ScriptedStack]]:
    config = settings(livekit.url, redis_url, channels, name)
    factories: list[ScriptedStack] = []

    def factory() -> ScriptedStack:
        factories.append(made := ScriptedStack())
        return made

    def room(_ctx: Any) -> CallRoom:
        return OneCaller()

    server, _load = build_server(config, executor="thread", voice=factory, room=room)
    async with standby_runtime(config):
        running = asyncio.create_task(server.run(devmode=False))
        try:
            yield factories
        finally:
            await server.aclose()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(running, 15)


async def test_a_job_killed_mid_call_is_dispatched_again_and_its_tasks_taken_over(
    redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)  # the second worker's analyst-b asks the model

    def script(request: RecordedRequest) -> Step:
        # the first question (in the killed job) never gets an answer
        return Stall() if len(model.requests) == 1 else Reply(text=(MODEL_ANSWER,))

    model = FakeOpenAIServer(script, api_key="sk-test-fake")
    livekit = FakeLiveKitServer(API_KEY, API_SECRET)
    await livekit.start()
    store = RedisStore(redis_server.url)
    log = tmp_path / "worker-a.log"
    try:
        async with model:
            channels = write_channels(tmp_path / "channels", model.base_url)
            with worker_process(livekit, redis_server.url, channels, "wa", log) as first:
                assert first.stdout is not None
                registered = await asyncio.to_thread(first.stdout.readline)
                assert registered.strip() == "registered", log.read_text()[-3000:]
                [worker_a] = list(livekit.workers)
                livekit.participants[ROOM_NAME] = ["alice"]
                metadata = json.dumps({"desk": "research-slow"})
                job = livekit.job("job-1", ROOM_NAME, metadata=metadata, agent_name="voicehub")
                assert (await livekit.offer(job, worker_a)).available

                async def analyst_b_asking() -> bool:
                    return bool(model.requests)

                await until(analyst_b_asking, what="analyst-b asking the model")
                call = await store.get_call(CONVERSATION_ROOM)
                assert call is not None and call.owner.startswith("wa-job-1")
                async with in_process_worker(
                    livekit, redis_server.url, channels, "wb"
                ) as factories:
                    await until(lambda: len(livekit.workers) == 2, what="the second worker")
                    first.kill()  # the job's process dies mid-call, its caller still there

                    async def spoken() -> list[str]:
                        said = [t for f in factories for s in f.sessions for t in s.said]
                        return said if any(MODEL_ANSWER in t for t in said) else []

                    said = await until(spoken, what="the result spoken", timeout=60)
                    taken = await store.get_call(CONVERSATION_ROOM)
                    tasks = await store.list_tasks(parent_room_id=CONVERSATION_ROOM)
    finally:
        await store.close()
        await livekit.aclose()
        print(log.read_text()[-4000:] if log.exists() else "")

    assert said[0] == APOLOGY  # the caller hears they were lost for a moment, then the rest
    assert any(t.startswith("I had to restart the work on heat pumps") for t in said)
    [dispatch] = livekit.dispatches
    assert (dispatch.room, dispatch.agent_name, dispatch.metadata) == (
        ROOM_NAME,
        "voicehub",
        metadata,
    )
    assert taken is not None and taken.state is CallState.LIVE
    assert taken.owner.startswith("wb-job-dispatch-1") and taken.takeovers >= 1
    lost = next(t for t in tasks if t.agent_id == "analyst-b")
    assert (lost.status, lost.reason) == (TaskStatus.FAILED, LOST_REASON)
    rerun = tasks[-1]
    assert (rerun.agent_id, rerun.status) == ("analyst-b", TaskStatus.OK)
    assert len(model.requests) == 2
