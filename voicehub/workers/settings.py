"""`voicehub worker` settings: the desks, the LiveKit server, the store, the capacity.

`WorkerSettings.from_env()` reads `VOICEHUB_CHANNELS`, `VOICEHUB_DB`, `VOICEHUB_STORE`,
`VOICEHUB_DESK`, `VOICEHUB_AGENT_NAME`, `VOICEHUB_WORKER_CAPACITY` and livekit's own
`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`; flags override them. Unset or empty
means default. The store is chosen as for `voicehub serve` (`StoreChoice`): on the same Redis,
a result held for a LiveKit caller is there for their next call through either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from voicehub.core.settings import settings_from_env
from voicehub.core.store.choice import StoreChoice
from voicehub.errors import ConfigError
from voicehub.workers.dispatch import DEFAULT_AGENT_NAME

__all__ = ["ENVIRONMENT", "WorkerSettings"]

# field -> the variable `from_env` reads it from
ENVIRONMENT = {
    "channels_dir": "VOICEHUB_CHANNELS",
    "db_path": "VOICEHUB_DB",
    "store": "VOICEHUB_STORE",
    "number_key": "VOICEHUB_NUMBER_KEY",
    "desk": "VOICEHUB_DESK",
    "agent_name": "VOICEHUB_AGENT_NAME",
    "capacity": "VOICEHUB_WORKER_CAPACITY",
    "metrics_port": "VOICEHUB_WORKER_METRICS_PORT",
    "metrics_dir": "PROMETHEUS_MULTIPROC_DIR",
    "url": "LIVEKIT_URL",
    "api_key": "LIVEKIT_API_KEY",
    "api_secret": "LIVEKIT_API_SECRET",
}


class WorkerSettings(StoreChoice):
    """`desk`: serve only this desk (its name is then the agent name); else every desk in
    `channels_dir` under `agent_name`. `capacity`: calls at once before the worker reports
    itself full. `shutdown_grace`: seconds a job ending waits for its background workers, so
    their results are held in the store rather than lost. `http_port`: livekit's health
    check server (`GET /` answers "OK"; 0 picks a free port)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channels_dir: Path = Path("channels")
    desk: str | None = None
    agent_name: str | None = None
    capacity: int = Field(default=8, ge=1)
    url: str | None = None
    api_key: str | None = None
    api_secret: str | None = Field(default=None, repr=False)
    http_port: int = Field(default=8081, ge=0, le=65535)
    shutdown_grace: float = Field(default=20.0, ge=0)
    # Prometheus on :metrics_port/metrics (livekit's server), gathering every job process'
    # figures (multiprocess mode) from files in `metrics_dir` (default: a temporary folder).
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    metrics_dir: Path | None = None

    @classmethod
    def from_env(cls, **overrides: Any) -> WorkerSettings:
        """Settings from the environment, then `overrides` (None values are ignored)."""
        return settings_from_env(cls, ENVIRONMENT, overrides, what="worker")

    @property
    def registered_name(self) -> str:
        """The agent name LiveKit dispatches this worker's jobs by."""
        return self.agent_name or self.desk or DEFAULT_AGENT_NAME

    def check_server(self) -> None:
        """ConfigError unless the LiveKit URL and credentials are all set."""
        missing = [
            ENVIRONMENT[field]
            for field in ("url", "api_key", "api_secret")
            if not getattr(self, field)
        ]
        if missing:
            raise ConfigError(
                f"the worker needs a LiveKit server: set {', '.join(missing)} "
                "(for a local `livekit-server --dev`: ws://localhost:7880, devkey, secret)"
            )
