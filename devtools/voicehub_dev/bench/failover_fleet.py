"""What the fail-over bench runs: `voicehub serve` instances on one Redis behind a balancer,
and a slow model for the analysts, so that a kill can land while their work is in flight.

    async with Fleet(folder, size=3) as fleet:
        fleet.balancer.url                  # what callers call
        owner = await fleet.owner(room_id)  # the instance the call record names
        owner.kill(); fleet.replace(owner)  # SIGKILL, and a new instance in its place

Redis is a `redis-server` of the bench's own (AOF on, a temp dir, a free port), or the one
`VOICEHUB_STORE` names with `--store redis`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import sys
import time
import uuid
from asyncio.subprocess import PIPE, Process
from pathlib import Path
from typing import Any

from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import CallRecord
from voicehub.core.store.redis import RedisStore
from voicehub.errors import VoicehubError
from voicehub_dev.fakes.balancer import Balancer
from voicehub_dev.fakes.openai_chat import FakeOpenAIServer, Reply

__all__ = ["TIMINGS", "Fleet", "Instance", "slow_model"]

# Short, so that a killed instance's work is taken over within seconds; the gaps measured do
# not depend on them (the call is taken up at once, the result's lease is broken at once).
TIMINGS = {
    "VOICEHUB_HEARTBEAT_INTERVAL": "0.5",
    "VOICEHUB_INSTANCE_TIMEOUT": "3",
    "VOICEHUB_DELIVERY_LEASE": "3",
}
AUTH_TOKEN = "bench-twilio-auth-token"
PUBLIC_URL = "https://voicehub_dev.bench"
MODEL_KEY_ENV = "VOICEHUB_BENCH_MODEL_KEY"
COMMAND = "voicehub.cli"
_READY = re.compile(r"serving at (\S+)")


def slow_model(delay: float, answer: str = "Heat pumps cut heating bills.") -> FakeOpenAIServer:
    """An OpenAI-compatible chat endpoint (any key) that answers `answer` after `delay`
    seconds: what analyst-b asks, so a call can be killed while its tool runs."""
    return FakeOpenAIServer(lambda request: Reply(text=(answer,), delay=delay), api_key=None)


def desk_files(folder: Path, model_url: str) -> Path:
    """The research desk, and `research-slow` whose analyst-b asks the slow model."""
    channels = folder / "channels"
    (channels / "knowledge").mkdir(parents=True, exist_ok=True)
    source = Path("channels")
    knowledge = (source / "knowledge" / "research.toml").read_text()
    (channels / "knowledge" / "research.toml").write_text(knowledge)
    research = (source / "research.toml").read_text()
    (channels / "research.toml").write_text(research)
    scripted_b = research[research.index('[agents.scripted]\nfallback = "I had nothing') :]
    scripted_b = scripted_b[: scripted_b.index("# -- orchestration")]
    model = (
        f'llm = {{ provider = "openai", model = "bench", base_url = "{model_url}", '
        f'api_key_env = "{MODEL_KEY_ENV}" }}\n\n'
    )
    slow = research.replace('name = "research"', 'name = "research-slow"', 1)
    (channels / "research-slow.toml").write_text(slow.replace(scripted_b, model))
    return channels


class Instance:
    """One `voicehub serve` process of the fleet."""

    def __init__(
        self, name: str, redis_url: str, channels: Path, logs: Path, *, module: str = COMMAND
    ) -> None:
        self.name, self.redis_url, self.channels, self.logs = name, redis_url, channels, logs
        self.module = module  # what runs `serve`: voicehub's command, or a wrapper of it
        self.url = ""
        self.process: Process | None = None
        self.retiring = False  # killed or draining: not counted as serving

    async def start(self, timeout: float = 180.0) -> None:
        command = ["-m", self.module, "serve", "--port", "0", "--channels", str(self.channels)]
        command += ["--store", self.redis_url, "--public-url", PUBLIC_URL, "--log-level", "warning"]
        environment = {
            **os.environ,
            **TIMINGS,
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "VOICEHUB_TOKEN": "",
            "VOICEHUB_INSTANCE_ID": self.name,
            "TWILIO_AUTH_TOKEN": AUTH_TOKEN,
            MODEL_KEY_ENV: "sk-bench",
        }
        with (self.logs / f"{self.name}.log").open("a") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, *command, stdout=PIPE, stderr=log, env=environment
            )
        assert self.process.stdout is not None
        url = await asyncio.wait_for(_ready_url(self.process.stdout), timeout)
        if url is None:
            raise VoicehubError(f"instance {self.name} did not start; see {self.logs}")
        self.url = url

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def kill(self) -> None:
        """SIGKILL: nothing cleaned up, as a crashed machine."""
        self.retiring = True
        if self.process is not None and self.process.returncode is None:
            self.process.kill()

    def drain(self) -> None:
        """SIGTERM: hand the calls over and exit."""
        self.retiring = True
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)

    async def stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


class Fleet:
    """`size` instances on one Redis behind a `Balancer`; `replace` keeps the size up."""

    def __init__(
        self, folder: Path, channels: Path, redis_url: str, size: int, *, module: str = COMMAND
    ) -> None:
        self.folder, self.channels, self.redis_url, self.size = folder, channels, redis_url, size
        self.module = module
        self.instances: list[Instance] = []
        self.balancer = Balancer([], interval=0.05)
        self.store = RedisStore(redis_url, prefix="voicehub")
        self._starting = TaskSet("fleet: replacement instances")

    async def __aenter__(self) -> Fleet:
        await self.balancer.__aenter__()
        await asyncio.gather(*(self._add() for _ in range(self.size)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._starting.aclose()
        await asyncio.gather(*(instance.stop() for instance in self.instances))
        await self.balancer.__aexit__(*exc)
        await self.store.close()

    async def _add(self) -> None:
        instance = Instance(
            f"fo-{uuid.uuid4().hex[:8]}", self.redis_url, self.channels, self.folder,
            module=self.module,
        )  # fmt: skip
        self.instances.append(instance)
        await instance.start()
        self.balancer.add(instance.url)

    def replace(self) -> None:
        """Start a new instance in the background (one was killed or drained)."""
        self._starting.start(self._add(), name="replacement")

    async def ready(self, count: int, timeout: float = 180.0) -> None:
        """Until `count` instances serve (started, not killed nor draining) and the
        balancer has seen them ready."""
        deadline = time.monotonic() + timeout
        while True:
            serving = [i for i in self.instances if i.alive and i.url and not i.retiring]
            pairs = zip(self.balancer.backends, self.balancer.ready, strict=False)
            ready = {f":{backend.port}" for backend, up in pairs if up}
            if sum(any(i.url.endswith(port) for port in ready) for i in serving) >= count:
                return
            if time.monotonic() > deadline:
                raise VoicehubError(f"fewer than {count} instances came up; see {self.folder}")
            await asyncio.sleep(0.1)

    async def owner(self, room_id: str, *, not_: str = "", timeout: float = 60.0) -> Instance:
        """The instance the call record names (once it is not `not_`)."""
        deadline = time.monotonic() + timeout
        while True:
            record: CallRecord | None = await self.store.get_call(room_id)
            if record is not None and record.owner not in ("", not_):
                return next(i for i in self.instances if i.name == record.owner)
            if time.monotonic() > deadline:
                raise VoicehubError(f"no instance took the call of {room_id}")
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def redis_url(store: str, folder: Path) -> Any:
    """The Redis to run on: `VOICEHUB_STORE` with `--store redis`, else a redis-server of
    the bench's own."""
    if store == "redis":
        yield os.environ.get("VOICEHUB_STORE") or "redis://127.0.0.1:6379/0"
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise VoicehubError(
            "the failover bench needs Redis: install redis-server, or pass --store redis "
            "with VOICEHUB_STORE set"
        )
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(folder),
        "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            await asyncio.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        await process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _ready_url(stdout: asyncio.StreamReader) -> str | None:
    while line := await stdout.readline():
        found = _READY.search(line.decode(errors="replace"))
        if found:
            return found.group(1).rstrip("/")
    return None
