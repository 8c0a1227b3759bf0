"""The model connection of a realtime call, on the official `openai` SDK's realtime client.

`realtime_client` builds the SDK client (imported lazily: `openai` is an optional extra).
`ModelConnection` opens `client.realtime.connect(model=...)` and offers what the session
needs: `send` for control events, a fast `append_audio` (the per-frame path skips the SDK's
typed transform, the JSON is built directly), and `events()`, the server events as dicts.
Server events are parsed here, not by the SDK: a frame that is not a JSON object with a
string `type` is logged and dropped, and dispatch goes by the `type` string (the SDK turns
unknown types into the wrong class; PROTOCOLS.md section 0). Big audio deltas take a fast
path that keeps their base64 out of the JSON decoder (`realtime.audio_delta`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

from voicehub.errors import ConfigError, MissingExtraError, VoicehubError
from voicehub.voice.realtime.audio_delta import FAST_PATH_MIN_BYTES, parse_audio_delta

__all__ = ["API_KEY_ENV", "ModelConnection", "ModelConnectionLost", "realtime_client"]

log = logging.getLogger("voicehub.voice.realtime")

API_KEY_ENV = "OPENAI_API_KEY"
_APPEND_HEAD = '{"type":"input_audio_buffer.append","audio":"'
_APPEND_TAIL = '"}'


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

    async def append_audio(self, pcm24k: bytes) -> None:
        """`input_audio_buffer.append` of PCM16 at the model's rate: base64 into a fixed
        JSON template, sent as is (no per-frame event model or JSON encoder)."""
        audio = base64.b64encode(pcm24k).decode("ascii")
        try:
            await self._connection.send_raw(_APPEND_HEAD + audio + _APPEND_TAIL)
        except Exception as exc:
            raise ModelConnectionLost(f"could not send audio: {exc!r}") from exc

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        """Server events until the connection closes (a drop raises, a normal close ends)."""
        while True:
            try:
                raw = await self._connection.recv_bytes()
            except Exception as exc:
                if type(exc).__name__ == "ConnectionClosedOK":
                    return
                raise
            if len(raw) >= FAST_PATH_MIN_BYTES:
                delta = parse_audio_delta(raw)
                if delta is not None:
                    yield delta
                    continue
            try:
                event = json.loads(raw)
            except ValueError:
                log.warning("dropped a server frame that is not JSON: %.80r", raw)
                continue
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                log.warning("dropped a server event without a string type: %.120r", raw)
                continue
            yield event

    async def aclose(self) -> None:
        """Close the WebSocket (normal closure)."""
        await self._connection.close()
