"""A `voicehub worker` as a process of its own, for the fail-over test: it registers with the
fake LiveKit server, serves its jobs in threads (livekit's thread executor) on a stand-in room
where "alice" is present, with the scripted session, on the test's Redis; its worker process
runs the standby runtime as `voicehub worker` does. On a new conversation the session asks
the desk for research at once (its `delegate_workers` tool), so the job has work running
when the test kills the process.

    python -m tests.workers.worker_process LIVEKIT_URL REDIS_URL CHANNELS INSTANCE_ID

Prints "registered" once LiveKit has answered the registration.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from voicehub.agents.tools import ToolContext
from voicehub.desks.voice_stack import CallSpec
from voicehub.workers.job import CallRoom
from voicehub.workers.server import build_server, standby_runtime
from voicehub.workers.settings import WorkerSettings
from voicehub_dev.fakes.livekit_room import StandInRoom
from voicehub_dev.fakes.server_session import ScriptedSession, ScriptedStack

API_KEY, API_SECRET = "devkey", "a-dev-secret-32-bytes-long-xxxxx"
TIMINGS = {"heartbeat_interval": 0.3, "instance_timeout": 3.0, "delivery_lease": 3.0}


class OneCaller(StandInRoom):
    """A room where "alice" is present when the job starts and hears everything at once
    (the agent's track plays as it is written: speech marks are confirmed right away)."""

    def __init__(self) -> None:
        super().__init__()
        self.join("alice")
        self._player = asyncio.get_running_loop().create_task(self._play())

    async def _play(self) -> None:
        while True:
            for audio in self.audio:
                audio.sink.play_all()
            await asyncio.sleep(0.02)


class DelegatingFactory(ScriptedStack):
    """Scripted sessions that ask for research as a new conversation starts."""

    async def start(self, call: CallSpec) -> ScriptedSession:
        hub, desk, room_id = call.hub, call.desk, call.room_id
        new = await hub.store.get_room(room_id) is None
        session = await super().start(call)
        if new:
            front = desk.front_agent.id
            [delegate] = [t for t in desk.tools_for(front) if t.name == "delegate_workers"]
            context = ToolContext(hub=hub, room_id=room_id, agent_id=front)
            await delegate.invoke({"task": "heat pumps"}, context)
        return session


def settings(livekit_url: str, redis_url: str, channels: Path, instance: str) -> WorkerSettings:
    return WorkerSettings(
        channels_dir=channels,
        store=redis_url,
        url=livekit_url,
        api_key=API_KEY,
        api_secret=API_SECRET,
        http_port=0,
        shutdown_grace=1.0,
        instance_id=instance,
        **TIMINGS,  # type: ignore[arg-type]
    )


async def main(livekit_url: str, redis_url: str, channels: str, instance: str) -> None:
    config = settings(livekit_url, redis_url, Path(channels), instance)

    def room(_ctx: Any) -> CallRoom:
        return OneCaller()

    server, _load = build_server(config, executor="thread", voice=DelegatingFactory, room=room)
    server.on("worker_registered", lambda *_: print("registered", flush=True))
    async with standby_runtime(config):
        await server.run(devmode=False)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
