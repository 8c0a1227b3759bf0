"""What the Deepgram STT and TTS share: the SDK client, the key, and the retry policy.

The SDK has no `base_url`: a self-hosted or fake Deepgram is reached through its
`DeepgramClientEnvironment` (`base` for REST, `production` for WebSockets), which
:class:`DeepgramEndpoint` builds. The SDK's own REST retries are turned off (they sleep on
the wall clock); :class:`RetryPolicy` with an injectable sleep does it instead.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from voicehub.errors import ConfigError, VoicehubError
from voicehub.voice.providers import vendor_import

__all__ = [
    "API_KEY_ENV",
    "DeepgramAuthError",
    "DeepgramEndpoint",
    "RetryPolicy",
    "Sleep",
    "fault_status",
    "is_retryable",
]

API_KEY_ENV = "DEEPGRAM_API_KEY"
Sleep = Callable[[float], Awaitable[None]]


class DeepgramAuthError(ConfigError):
    """The key is missing or Deepgram refused it (401/403): retrying cannot help."""


@dataclass(frozen=True)
class DeepgramEndpoint:
    """Where Deepgram is and how to authenticate.

    `api_key` defaults to the `api_key_env` variable, read when a client is built (so a key
    exported after startup is seen). `base_url` is the REST base; `websocket_url` defaults
    to it with http -> ws.
    """

    api_key: str | None = None
    api_key_env: str = API_KEY_ENV
    base_url: str = "https://api.deepgram.com"
    websocket_url: str | None = None

    def key(self) -> str:
        """The API key; DeepgramAuthError naming the variable when there is none."""
        key = self.api_key or os.environ.get(self.api_key_env, "")
        if not key.strip():
            raise DeepgramAuthError(
                f"Deepgram needs an API key: set {self.api_key_env} (keys never go in desk files)"
            )
        return key

    def client(self) -> Any:
        """The `AsyncDeepgramClient` for this endpoint and key (SDK retries off).

        One per event loop, key and URLs, shared by every stream: building one costs about
        5 ms (an HTTP client and its TLS context), too much for each reply's socket."""
        key = self.key()
        base = self.base_url.rstrip("/")
        sockets = (self.websocket_url or _websocket_base(base)).rstrip("/")
        try:
            clients = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
        except RuntimeError:  # no loop: nothing to share it with
            clients = {}
        client = clients.get((key, base, sockets))
        if client is None:
            with vendor_import("deepgram-sdk", "deepgram"):
                from deepgram import AsyncDeepgramClient, DeepgramClientEnvironment

            environment = DeepgramClientEnvironment(
                base=base, production=sockets, agent=sockets, agent_rest=base
            )
            from voicehub.voice.providers.deepgram.socket_transport import PlainSocket

            client = AsyncDeepgramClient(
                api_key=key,
                environment=environment,
                max_retries=0,
                transport_factory=PlainSocket,  # uncompressed (see socket_transport)
            )
            clients[(key, base, sockets)] = client
        return client


# The shared clients, per event loop (an HTTP client's connections belong to one loop).
_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str, str], Any]] = (
    weakref.WeakKeyDictionary()
)


def _websocket_base(url: str) -> str:
    if url.startswith("https://"):
        return "wss://" + url.removeprefix("https://")
    if url.startswith("http://"):
        return "ws://" + url.removeprefix("http://")
    return url


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for 429, 5xx and dropped connections.

    The first retry after a drop is immediate (drops are usually one-off); then
    `initial_delay` doubling up to `max_delay`. `attempts` retries in a row, then give up.
    """

    attempts: int = 5
    initial_delay: float = 0.25
    max_delay: float = 4.0

    def delay(self, attempt: int, status: int | None) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if attempt == 1 and status is None:
            return 0.0
        return float(min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1)))


def fault_status(exc: BaseException) -> int | None:
    """The HTTP status behind an SDK error (REST) or a refused handshake, if it has one."""
    status = getattr(exc, "status_code", None)
    if status is None:  # websockets' InvalidStatus: the handshake's response
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, and network failures (refused, reset, closed without a close frame)."""
    status = fault_status(exc)
    if status is not None:
        return status == 429 or status >= 500
    if isinstance(exc, VoicehubError):
        return False
    with vendor_import("deepgram-sdk", "deepgram"):
        from websockets.exceptions import ConnectionClosed, InvalidHandshake
    return isinstance(exc, OSError | ConnectionClosed | InvalidHandshake | TimeoutError)


def auth_error(exc: BaseException, endpoint: DeepgramEndpoint) -> DeepgramAuthError | None:
    """A clear DeepgramAuthError when `exc` is Deepgram refusing the key."""
    if fault_status(exc) in (401, 403):
        return DeepgramAuthError(
            f"Deepgram refused the API key in {endpoint.api_key_env} "
            f"(HTTP {fault_status(exc)}): check the key and its project's permissions"
        )
    return None
