"""The real livekit-agents worker, built by `voicehub worker`'s code, against a fake LiveKit
server speaking the agent worker protocol on 127.0.0.1 (no LiveKit server runs here).

Jobs run in threads (livekit's thread executor) so the entrypoint can be handed the
stand-in room and the scripted session; production runs them in processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from livekit.agents import worker as lk_worker
from livekit.protocol import agent

from voicehub.workers.job import CallRoom
from voicehub.workers.server import DESK_ATTRIBUTE, build_server
from voicehub.workers.settings import WorkerSettings
from voicehub_dev.fakes.livekit_room import StandInRoom
from voicehub_dev.fakes.livekit_server import FakeLiveKitServer
from voicehub_dev.fakes.server_session import ScriptedStack

CHANNELS = Path(__file__).resolve().parents[2] / "channels"


class OneCaller(StandInRoom):
    """A room where "alice" is already present when the job starts."""

    def __init__(self) -> None:
        super().__init__()
        self.join("alice")


@pytest.fixture
async def fake_server() -> AsyncIterator[FakeLiveKitServer]:
    server = FakeLiveKitServer()
    await server.start()
    yield server
    await server.aclose()


@contextlib.asynccontextmanager
async def running_worker(
    fake: FakeLiveKitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **settings: object
) -> AsyncIterator[tuple[object, list[ScriptedStack]]]:
    # status every 50 ms instead of 2.5 s: the messages are the same, the test shorter
    monkeypatch.setattr(lk_worker, "UPDATE_STATUS_INTERVAL", 0.05)
    monkeypatch.setattr(lk_worker, "UPDATE_LOAD_INTERVAL", 0.05)
    config = WorkerSettings(
        channels_dir=CHANNELS,
        db_path=tmp_path / "worker.db",
        url=fake.url,
        api_key=fake.api_key,
        api_secret=fake.api_secret,
        http_port=0,
        shutdown_grace=1.0,
        **settings,  # type: ignore[arg-type]
    )
    factories: list[ScriptedStack] = []

    def factory() -> ScriptedStack:
        factories.append(made := ScriptedStack())
        return made

    def room(_ctx: object) -> CallRoom:
        return OneCaller()

    server, _load = build_server(
        config, executor="thread", num_idle_processes=1, voice=factory, room=room
    )
    task = asyncio.create_task(server.run(devmode=False))
    try:
        yield server, factories
    finally:
        await server.aclose()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 15)


async def test_the_worker_registers_takes_a_desk_job_and_reports_its_calls_as_load(
    fake_server: FakeLiveKitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_worker(fake_server, tmp_path, monkeypatch, desk="research", capacity=2) as (
        _worker,
        factories,
    ):
        registration = await fake_server.registered()
        assert registration.agent_name == "research"  # explicit dispatch by desk
        assert registration.type == agent.JobType.JT_ROOM
        assert fake_server.auth_claims is not None
        grants = fake_server.auth_claims["video"]
        assert grants["agent"] is True and not grants.get("roomJoin")  # a worker, not a guest

        idle = await fake_server.wait_for("update_worker", lambda u: u.job_count == 0)
        assert idle.load == 0.0 and idle.status == agent.WorkerStatus.WS_AVAILABLE

        job = fake_server.job(
            "job-1",
            "research-abc",
            metadata=json.dumps({"desk": "research"}),
            agent_name="research",
        )
        answer = await fake_server.offer(job)
        assert answer.available
        assert answer.participant_identity == "voicehub-research-job-1"
        assert answer.participant_attributes[DESK_ATTRIBUTE] == "research"

        # alice is in the room: one live call out of two
        busy = await fake_server.wait_for("update_worker", lambda u: u.load == 0.5)
        assert busy.job_count == 1 and busy.status == agent.WorkerStatus.WS_AVAILABLE
        await fake_server.wait_for(
            "update_job", lambda u: u.job_id == "job-1" and u.status == agent.JobStatus.JS_RUNNING
        )
        [factory] = factories
        assert [s.room_id for s in factory.sessions] == ["research:alice"]

        await fake_server.terminate("job-1")
        ended = len(fake_server.received)

        def after_termination(update: agent.UpdateWorkerStatus) -> bool:
            index = next(i for i, m in enumerate(fake_server.received) if m.update_worker is update)
            return index >= ended and update.load == 0.0

        await fake_server.wait_for("update_worker", after_termination)
        assert factory.sessions[0].closed


async def test_a_full_worker_and_a_job_for_another_desk_are_refused(
    fake_server: FakeLiveKitServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_worker(fake_server, tmp_path, monkeypatch, desk="research", capacity=1):
        await fake_server.registered()
        other = fake_server.job("job-x", "drafting-1", metadata=json.dumps({"desk": "drafting"}))
        assert not (await fake_server.offer(other)).available

        assert (await fake_server.offer(fake_server.job("job-1", "research-1"))).available
        full = await fake_server.wait_for("update_worker", lambda u: u.load == 1.0)
        assert full.status == agent.WorkerStatus.WS_FULL
        assert not (await fake_server.offer(fake_server.job("job-2", "research-2"))).available
