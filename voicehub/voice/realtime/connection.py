"""The model connection of a realtime call, on the official `openai` SDK's realtime client.

`realtime_client` builds the SDK client (imported lazily: `openai` is an optional extra).
`ModelConnection` opens `client.realtime.connect(model=...)` and offers what the session
needs: `send` for control events, a fast `append_audio` (the per-frame path skips the SDK's
typed transform, the JSON is built directly), and `read`, which hands each server event to
its handler. Server events are parsed here, not by the SDK (`realtime.server_events`):
dispatch goes by the `type` string (the SDK turns unknown types into the wrong class;
PROTOCOLS.md section 0).
"""

from __future__ import annotations

import binascii
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from voicehub.errors import ConfigError, MissingExtraError, ProtocolError, VoicehubError
from voicehub.voice.realtime.server_events import parse_server_event

__all__ = [
    "API_KEY_ENV",
    "EventHandler",
    "ModelConnection",
    "ModelConnectionLost",
    "realtime_client",
]

log = logging.getLogger("voicehub.voice.realtime")

API_KEY_ENV = "OPENAI_API_KEY"
_APPEND_HEAD = '{"type":"input_audio_buffer.append","audio":"'
_APPEND_TAIL = '"}'
# what a handler raises on an event that lacks or mistypes a field: the event is dropped
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, ProtocolError)

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]


def realtime_client(
    *, api_key_env: str = API_KEY_ENV, base_url: str | None = None, where: str = "this desk"
) -> Any:
    """An `openai.AsyncOpenAI` for realtime calls. ConfigError naming the variable when the
    key is missing; MissingExtraError when the `openai` package is not installed."""
    key = os.environ.get(api_key_env)
    if not key:
        raise ConfigError(
            f"{where}: the realtime voice engine needs an OpenAI API key in the environment "
            f"variable {api_key_env} (it is not set)"
        )
    try:
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise MissingExtraError("openai", "openai") from exc
    return AsyncOpenAI(api_key=key, base_url=base_url)


class ModelConnectionLost(VoicehubError):
    """A send found the model connection gone (the reader reconnects)."""


class ModelConnection:
    """One open Realtime WebSocket (use `open`, then `aclose`)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self.sent_events = 0

    @property
    def sdk_connection(self) -> Any:
        """The SDK's `AsyncRealtimeConnection` under this one."""
        return self._connection

    @classmethod
    async def open(cls, client: Any, model: str) -> ModelConnection:
        """Connect to `model` through `client` (an `openai.AsyncOpenAI`)."""
        connection = await client.realtime.connect(model=model).enter()
        return cls(connection)

    async def send(self, event: dict[str, Any]) -> None:
        """Send one client event (a dict in the GA shape)."""
        self.sent_events += 1
        try:
            await self._connection.send(event)
        except Exception as exc:
            raise ModelConnectionLost(f"could not send {event.get('type')}: {exc!r}") from exc

    async def append_audio(self, audio: bytes | bytearray | memoryview) -> None:
        """`input_audio_buffer.append` of audio in the session's input format (read at
        once, never kept): base64 into a fixed JSON template, sent as is (no per-frame
        event model or JSON encoder)."""
        encoded = binascii.b2a_base64(audio, newline=False).decode("ascii")
        try:
            await self._connection.send_raw(_APPEND_HEAD + encoded + _APPEND_TAIL)
        except Exception as exc:
            raise ModelConnectionLost(f"could not send audio: {exc!r}") from exc

    async def read(self, handlers: Mapping[str, EventHandler]) -> None:
        """Hand each server event to the handler of its `type` (others are read and
        dropped) until the connection closes: a drop raises, a normal close returns. An
        event its handler finds malformed is logged and dropped."""
        recv = self._connection.recv_bytes
        while True:
            try:
                raw = await recv()
            except Exception as exc:
                if type(exc).__name__ == "ConnectionClosedOK":
                    return
                raise
            event = parse_server_event(raw)
            if event is None:
                continue
            handler = handlers.get(event["type"])
            if handler is None:
                continue
            try:
                await handler(event)
            except _MALFORMED as exc:
                log.warning("dropped malformed %s: %r", event["type"], exc)

    async def aclose(self) -> None:
        """Close the WebSocket (normal closure)."""
        await self._connection.close()
