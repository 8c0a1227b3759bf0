"""Server settings: where to listen, which desks, which store, who may call.

`ServerSettings.from_env()` reads `VOICEHUB_*` variables; `voicehub serve` flags override
them. Binding anything but a loopback address without an access token is refused: a voice
desk can start work (and spend money on cloud models) for whoever reaches it.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from voicehub.errors import ConfigError

__all__ = ["LOOPBACK_HOSTS", "ServerSettings"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MIN_TOKEN = 16


class ServerSettings(BaseModel):
    """Everything `create_app` and `voicehub serve` need.

    `token`: when set, every call and API request must carry it (`?token=` or
    `Authorization: Bearer`); required to listen on a non-loopback address.
    `store`: None for the SQLite file at `db_path`, or a `redis://` / `rediss://` URL to share
    one Redis among instances. `max_audio_bytes` / `max_text_bytes`: the largest client
    messages accepted (bigger ones close the call with 1009). `prewarm`: load the voice
    models at startup so the first call does not wait for them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    channels_dir: Path = Path("channels")
    db_path: Path = Path("var/voicehub.db")
    store: str | None = None
    token: str | None = None
    max_audio_bytes: int = Field(default=32000, ge=640)
    max_text_bytes: int = Field(default=4096, ge=256)
    prewarm: bool = True
    log_level: str = "info"

    @field_validator("token")
    @classmethod
    def _token_long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < _MIN_TOKEN:
            raise ValueError(
                f"the access token has {len(value)} characters; use at least {_MIN_TOKEN} "
                '(for example: python -c "import secrets; print(secrets.token_urlsafe())")'
            )
        return value

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if value in (None, "", "sqlite"):
            return None
        assert value is not None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(
                f"{value!r} is not a store: use sqlite (the default, at --db) or a Redis URL "
                "such as redis://localhost:6379/0"
            )
        return value

    @field_validator("max_audio_bytes")
    @classmethod
    def _whole_frames(cls, value: int) -> int:
        if value % 640:
            raise ValueError(f"{value} is not a whole number of 20 ms frames (640 bytes)")
        return value

    @classmethod
    def create(cls, **values: Any) -> ServerSettings:
        """Validate `values` (None means: the default), raising ConfigError on bad input."""
        given = {key: value for key, value in values.items() if value is not None}
        try:
            return cls(**given)
        except ValidationError as exc:
            lines = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
            raise ConfigError("invalid server settings:\n  " + "\n  ".join(lines)) from None

    @classmethod
    def from_env(cls, **overrides: Any) -> ServerSettings:
        """Settings from `VOICEHUB_HOST`, `_PORT`, `_CHANNELS`, `_DB`, `_STORE`, `_TOKEN`, then
        `overrides` (None values are ignored)."""
        env = os.environ
        values: dict[str, Any] = {
            "host": env.get("VOICEHUB_HOST"),
            "port": env.get("VOICEHUB_PORT"),
            "channels_dir": env.get("VOICEHUB_CHANNELS"),
            "db_path": env.get("VOICEHUB_DB"),
            "store": env.get("VOICEHUB_STORE") or None,
            "token": env.get("VOICEHUB_TOKEN") or None,
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls.create(**values)

    @property
    def is_loopback(self) -> bool:
        """Whether `host` only accepts connections from this machine."""
        if self.host in LOOPBACK_HOSTS:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def check_bind(self) -> None:
        """Refuse a non-loopback address without a token (ConfigError says what to do)."""
        if not self.is_loopback and self.token is None:
            raise ConfigError(
                f"refusing to listen on {self.host}: anyone who reaches it could call the "
                "desks. Set an access token (--token or VOICEHUB_TOKEN) or listen on "
                "127.0.0.1"
            )

    @property
    def base_url(self) -> str:
        """The URL a browser on this machine would open."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"
