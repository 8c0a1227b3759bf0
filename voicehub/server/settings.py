"""Server settings: where to listen, which desks, which store, who may call.

`ServerSettings.from_env()` reads `VOICEHUB_*` variables; `voicehub serve` flags override
them. Binding anything but a loopback address without an access token is refused: a voice
desk can start work (and spend money on cloud models) for whoever reaches it.
The reading itself (variables, flags on top, errors naming the variable) is shared with
`voicehub worker`: `voicehub.core.settings`; so is the store choice (`StoreChoice`).
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from voicehub.core.settings import settings_from_env, validated_settings
from voicehub.desks.runtime_settings import RUNTIME_VARIABLES, RuntimeSettings
from voicehub.errors import ConfigError
from voicehub.telephony.settings import CarrierSettings

__all__ = ["LOOPBACK_HOSTS", "IceServer", "ServerSettings"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MIN_TOKEN = 16

# The variable `from_env` reads for each field.
_VARIABLES = {
    "host": "VOICEHUB_HOST",
    "port": "VOICEHUB_PORT",
    "channels_dir": "VOICEHUB_CHANNELS",
    "db_path": "VOICEHUB_DB",
    "store": "VOICEHUB_STORE",
    "token": "VOICEHUB_TOKEN",
    "public_url": "VOICEHUB_PUBLIC_URL",
    "twilio_auth_token": "TWILIO_AUTH_TOKEN",
    "twilio_account_sid": "TWILIO_ACCOUNT_SID",
    "ice_servers": "VOICEHUB_ICE_SERVERS",
    "max_peer_connections": "VOICEHUB_MAX_PEERS",
    "twilio_api_url": "TWILIO_API_URL",
    "number_key": "VOICEHUB_NUMBER_KEY",
    "drain_seconds": "VOICEHUB_DRAIN_SECONDS",
    "batch_vad": "VOICEHUB_BATCH_VAD",
    "max_calls": "VOICEHUB_MAX_CALLS",
    "call_starts_per_minute": "VOICEHUB_CALL_STARTS_PER_MINUTE",
    "call_start_burst": "VOICEHUB_CALL_START_BURST",
    "recordings_dir": "VOICEHUB_RECORDINGS",
    **RUNTIME_VARIABLES,
}


class IceServer(BaseModel):
    """A STUN or TURN server for WebRTC calls (`urls` like "stun:host:3478")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: list[str] = Field(min_length=1)
    username: str | None = None
    credential: str | None = None


class ServerSettings(RuntimeSettings):
    """Everything `create_app` and `voicehub serve` need.

    `token`: when set, every call and API request must carry it (`?token=` or
    `Authorization: Bearer`); required to listen on a non-loopback address.
    `store`: None for the SQLite file at `db_path`, or a `redis://` / `rediss://` URL to share
    one Redis among instances. `max_audio_bytes` / `max_text_bytes`: the largest client
    messages accepted (bigger ones close the call with 1009). `prewarm`: load the voice
    models at startup (and a reloaded desk's when its file is saved) so the first call does
    not wait for them. `drain_seconds`: on
    SIGTERM, how long live calls may go on before they are ended (results held).
    `batch_vad`: run the calls' Silero VAD inferences batched (one ONNX run per 20 ms tick
    for every call); false runs one inference per call, as livekit does.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    channels_dir: Path = Path("channels")
    token: str | None = None
    max_audio_bytes: int = Field(default=32000, ge=640)
    max_text_bytes: int = Field(default=4096, ge=256)
    prewarm: bool = True
    batch_vad: bool = True
    ice_servers: tuple[IceServer, ...] = ()
    max_peer_connections: int = Field(default=20, ge=1)
    webrtc_silence_timeout: float = Field(default=10.0, gt=0)
    log_level: str = "info"
    drain_seconds: float = Field(default=30.0, ge=0)
    # Calls at once before new ones are refused busy (None: as many as the load allows).
    max_calls: int | None = Field(default=None, ge=1)
    # Call starts a token or a client address may make per minute, beyond a burst of
    # `call_start_burst`, before new calls are refused (None: no limit;
    # `voicehub.server.call_starts`).
    call_starts_per_minute: float | None = Field(default=None, gt=0)
    call_start_burst: int = Field(default=5, ge=1)
    # `serve --reload`: watch the desk folder; changed desks serve new calls
    # (`voicehub.server.desk_reload`).
    reload_desks: bool = False
    # Phone calls (Twilio): the caller-facing https URL of this server (behind a tunnel or
    # proxy the request's host is not it), the account's auth token that signs webhooks,
    # and the account sid for call-backs. See `voicehub.telephony.twilio.webhooks`.
    public_url: str | None = Field(default=None, pattern=r"^https://[^/?#\s]+(/[^?#\s]*)?$")
    twilio_auth_token: str | None = None
    twilio_account_sid: str | None = None
    # Where the REST API for call-backs lives: Twilio's own unless set (a proxy, a fake).
    twilio_api_url: str | None = Field(default=None, pattern=r"^https?://[^/?#\s]+/?$")
    # Where the recordings of desks with `[record]` go (default: `recordings/` beside the
    # SQLite file); several instances need a shared folder to serve each other's.
    recordings_dir: Path | None = None
    # Telnyx, Plivo and Vonage numbers (`voicehub.telephony`): their own variables.
    carriers: CarrierSettings = Field(default_factory=CarrierSettings)

    @property
    def recordings_folder(self) -> Path:
        return self.recordings_dir or self.db_path.parent / "recordings"

    @field_validator("token")
    @classmethod
    def _token_long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value) < _MIN_TOKEN:
            raise ValueError(
                f"the access token has {len(value)} characters; use at least {_MIN_TOKEN} "
                '(for example: python -c "import secrets; print(secrets.token_urlsafe())")'
            )
        return value

    @field_validator("ice_servers", mode="before")
    @classmethod
    def _ice_servers_from_text(cls, value: Any) -> Any:
        # From the environment: space- or comma-separated URLs ("stun:host:3478"), or JSON
        # (a list of {"urls": [...], "username": ..., "credential": ...}) for TURN logins.
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc}") from None
        return [{"urls": [url]} for url in value.replace(",", " ").split()]

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
        return validated_settings(cls, given, what="server")

    @classmethod
    def from_env(cls, **overrides: Any) -> ServerSettings:
        """Settings from the variables of `_VARIABLES` (`VOICEHUB_HOST`, `_PORT`, ...,
        `TWILIO_AUTH_TOKEN`; unset or empty: the default), then `overrides` (None values
        are ignored). A bad value's error names the variable it came from."""
        if overrides.get("carriers") is None:
            overrides = {**overrides, "carriers": CarrierSettings.from_env()}
        return settings_from_env(cls, _VARIABLES, overrides, what="server")

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
