"""A real replicated Redis for the tests: a primary, a replica of it and one Sentinel watching
them (quorum 1, the primary judged down after `DOWN_AFTER_MS`), each a redis-server process on
a free 127.0.0.1 port in a temp dir, stopped by its own PID at the end.

    with running_sentinel_set() as redis_set:      # ready: the replica in sync, watched
        store = RedisStore(redis_set.url)           # redis+sentinel://127.0.0.1:<port>/voicehub/0
        redis_set.kill_primary()                    # SIGKILL by PID: Sentinel promotes the replica
        await until(lambda: redis_set.primary_port() == redis_set.replica.port)

Without Debian's redis-server the tests using it fail with the command that installs it.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError

from voicehub_dev.fakes.redis_server import RedisServer

SERVICE = "voicehub"
DOWN_AFTER_MS = 500
_READY_SECONDS = 20.0


class RedisReplica(RedisServer):
    """A redis-server started as a replica of `primary` (AOF on, as the primary)."""

    def __init__(self, directory: Path, primary: RedisServer) -> None:
        super().__init__(directory)
        self.primary_port = primary.port

    def command(self, *, appendonly: bool) -> list[str]:
        return [
            *super().command(appendonly=appendonly),
            "--replicaof",
            "127.0.0.1",
            str(self.primary_port),
        ]


class SentinelServer(RedisServer):
    """redis-server in Sentinel mode watching `primary` as `SERVICE` (its config is a file
    of its own in `directory`: Sentinel rewrites it)."""

    def __init__(self, directory: Path, primary: RedisServer) -> None:
        super().__init__(directory)
        self.primary_port = primary.port

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, *, appendonly: bool = True) -> None:
        config = self.directory / "sentinel.conf"
        config.write_text(
            f"bind 127.0.0.1\nport {self.port}\ndir {self.directory}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 1\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
        )
        self.process = subprocess.Popen(
            [self.binary, str(config), "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()


class SentinelSet:
    """The processes: `primary`, `replicas` (`replica` the first) and `sentinel`; `url` is
    the store URL naming the Sentinel."""

    def __init__(self, directory: Path, replicas: int = 1) -> None:
        names = ["primary", *(f"replica{n}" for n in range(replicas)), "sentinel"]
        dirs = [directory / name for name in names]
        for path in dirs:
            path.mkdir()
        self.primary = RedisServer(dirs[0])
        self.replicas = [RedisReplica(path, self.primary) for path in dirs[1:-1]]
        self.replica = self.replicas[0]
        self.sentinel = SentinelServer(dirs[-1], self.primary)

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{SERVICE}/0"

    def start(self) -> None:
        """The primary, the replicas (in sync before the Sentinel starts, so that the
        Sentinel's first look at the primary finds them) and the Sentinel, which is waited
        for until it knows each replica as one it can promote."""
        self.primary.start()
        for server in (self.primary, *self.replicas):
            if server is not self.primary:
                server.start()
            with Redis.from_url(server.url) as client:  # a replica syncs at once, not 5 s on
                client.config_set("repl-diskless-sync-delay", 0)  # (a promoted one too)
        self._wait_for(self._replicas_in_sync, "the replicas to be in sync with the primary")
        self.sentinel.start()
        self._wait_for(self._replicas_watched, "the Sentinel to know the replicas")

    def primary_port(self) -> int | None:
        """The port of the primary the Sentinel names now (None while it names none)."""
        with Redis.from_url(self.sentinel.url, socket_timeout=1.0) as sentinel:
            try:
                master = sentinel.sentinel_master(SERVICE)
            except RedisError:
                return None
        flags = str(master.get("flags", ""))
        if "down" in flags or "failover" in flags:
            return None
        return int(master["port"])

    def sync_replicas(self) -> None:
        """Until every replica has every write the primary took: a write of this client's
        own, then `WAIT` for all replicas (replication is one stream, so acking it acks all
        before it)."""
        with Redis.from_url(self.primary.url, socket_timeout=10.0) as client:
            client.set("voicehub-harness:sync", 1)
            reached = int(client.wait(len(self.replicas), 5000))
        if reached < len(self.replicas):
            pytest.fail(f"{reached} of {len(self.replicas)} replicas caught up within 5 s")

    def kill_primary(self) -> None:
        """SIGKILL the primary by its PID: no AOF flush, no goodbye to the replica."""
        self.primary.stop(kill=True)

    def stop(self) -> None:
        for server in (self.sentinel, *self.replicas, self.primary):
            server.stop()

    def _replicas_in_sync(self) -> bool:
        for server in self.replicas:
            with Redis.from_url(server.url, socket_timeout=1.0) as replica:
                if replica.info("replication").get("master_link_status") != "up":
                    return False
        return True

    def _replicas_watched(self) -> bool:
        with Redis.from_url(self.sentinel.url, socket_timeout=1.0) as sentinel:
            watched = sentinel.sentinel_slaves(SERVICE)
        ready = {
            int(r["port"])
            for r in watched
            if r.get("master-link-status") == "ok" and r.get("flags") == "slave"
        }
        return ready >= {replica.port for replica in self.replicas}

    @staticmethod
    def _wait_for(ready: Callable[[], bool], what: str) -> None:
        # Waiting for child processes to be set up, not timing behaviour: poll them.
        deadline = time.monotonic() + _READY_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(RedisError):
                if ready():
                    return
            time.sleep(0.05)
        pytest.fail(f"waited {_READY_SECONDS:g} s for {what}")


@contextlib.contextmanager
def running_sentinel_set(replicas: int = 1) -> Iterator[SentinelSet]:
    """A primary, `replicas` replicas of it and a Sentinel, ready (see `SentinelSet.start`),
    all stopped by their PIDs on exit."""
    with tempfile.TemporaryDirectory(prefix="voicehub-sentinel-") as directory:
        redis_set = SentinelSet(Path(directory), replicas)
        try:
            redis_set.start()
            yield redis_set
        finally:
            redis_set.stop()


__all__ = ["DOWN_AFTER_MS", "SERVICE", "SentinelSet", "running_sentinel_set"]
