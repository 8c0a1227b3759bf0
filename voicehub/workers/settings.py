"""`voicehub worker` settings: the desks, the LiveKit server, the store, the capacity.

`WorkerSettings.from_env()` reads `VOICEHUB_CHANNELS`, `VOICEHUB_DB`, `VOICEHUB_DESK`,
`VOICEHUB_AGENT_NAME`, `VOICEHUB_WORKER_CAPACITY` and livekit's own `LIVEKIT_URL`,
`LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`; flags override them. Unset or empty means default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voicehub.core.validation import describe_errors
from voicehub.errors import ConfigError
from voicehub.workers.dispatch import DEFAULT_AGENT_NAME

__all__ = ["ENVIRONMENT", "WorkerSettings"]

# field -> the variable `from_env` reads it from
ENVIRONMENT = {
    "channels_dir": "VOICEHUB_CHANNELS",
    "db_path": "VOICEHUB_DB",
    "desk": "VOICEHUB_DESK",
    "agent_name": "VOICEHUB_AGENT_NAME",
    "capacity": "VOICEHUB_WORKER_CAPACITY",
    "url": "LIVEKIT_URL",
    "api_key": "LIVEKIT_API_KEY",
    "api_secret": "LIVEKIT_API_SECRET",
}


class WorkerSettings(BaseModel):
    """`desk`: serve only this desk (its name is then the agent name); else every desk in
    `channels_dir` under `agent_name`. `capacity`: calls at once before the worker reports
    itself full. `shutdown_grace`: seconds a job ending waits for its background workers, so
    their results are held in the store rather than lost. `http_port`: livekit's health
    check server (`GET /` answers "OK"; 0 picks a free port)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channels_dir: Path = Path("channels")
    db_path: Path = Path("var/voicehub.db")
    desk: str | None = None
    agent_name: str | None = None
    capacity: int = Field(default=8, ge=1)
    url: str | None = None
    api_key: str | None = None
    api_secret: str | None = Field(default=None, repr=False)
    http_port: int = Field(default=8081, ge=0, le=65535)
    shutdown_grace: float = Field(default=20.0, ge=0)

    @classmethod
    def from_env(cls, **overrides: Any) -> WorkerSettings:
        """Settings from the environment, then `overrides` (None values are ignored)."""
        given = {key: value for key, value in overrides.items() if value is not None}
        found = {
            field: name
            for field, name in ENVIRONMENT.items()
            if os.environ.get(name) and field not in given
        }
        values = {field: os.environ[name] for field, name in found.items()}
        try:
            return cls(**{**values, **given})
        except ValidationError as exc:
            lines = []
            for line in describe_errors(exc):
                field, message = line.split(": ", 1)
                lines.append(f"{found.get(field, field)}: {message}")
            raise ConfigError("invalid worker settings:\n  " + "\n  ".join(lines)) from None

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
