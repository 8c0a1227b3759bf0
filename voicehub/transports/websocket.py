"""The WebSocket call protocol: pure frame validation and the `CallTransport` over a socket.

Wire protocol (one call per socket, `/desks/{desk}/call?conversation=<id>`):

- In, binary: caller audio, PCM16 mono 16 kHz little-endian, a whole number of 20 ms frames
  (multiples of 640 bytes), at most one second (32000 bytes) per message.
- In, text: JSON `{"type": "playout", "id": ...}` (everything up to that speech mark has
  played), `{"type": "hangup"}`, `{"type": "status"}` (the server answers with a status
  event: activity, running tasks and pending deliveries).
- Out, binary: agent audio, same format, faster than real time (the client buffers).
- Out, text: JSON events, among them `{"type": "speech_mark", "id": ...}` after the audio of
  a speech segment (ack it with `playout` once played), `{"type": "clear"}` (drop buffered
  audio: the caller barged in) and `{"type": "error", "code": ..., "message": ...}`.

A malformed message gets an error frame and is dropped; the call goes on. A message too big
to be sane closes the call with 1009. The validators below are pure functions, tested
without sockets; `WebSocketTransport` only queues frames and `pump`s them to a socket.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from voicehub.core.validation import describe_errors
from voicehub.voice.audio import frame_bytes

__all__ = [
    "FRAME_BYTES",
    "MAX_AUDIO_BYTES",
    "MAX_TEXT_BYTES",
    "SAMPLE_RATE",
    "ClientMessage",
    "CloseCode",
    "Hangup",
    "OutboundSocket",
    "Playout",
    "ProtocolViolation",
    "StatusRequest",
    "WebSocketTransport",
    "check_audio_message",
    "error_event",
    "parse_text_message",
]

SAMPLE_RATE = 16000
FRAME_BYTES = frame_bytes(SAMPLE_RATE)  # 640: 20 ms of 16 kHz PCM16
MAX_AUDIO_BYTES = 50 * FRAME_BYTES  # one second per message
MAX_TEXT_BYTES = 4096  # acks and commands are tiny; anything bigger is a broken client


class CloseCode(IntEnum):
    """Close codes the server uses (4xxx are application codes, mirroring HTTP)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    BAD_REQUEST = 4400
    UNAUTHORIZED = 4401
    UNKNOWN_DESK = 4404
    REPLACED = 4409


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """What is wrong with a client message. `close_code` set means: end the call."""

    code: str
    message: str
    close_code: CloseCode | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Playout(_Message):
    """The client played every byte of agent audio sent before speech mark `id`."""

    type: Literal["playout"]
    id: str = Field(min_length=1, max_length=200)


class Hangup(_Message):
    """The caller ends the call (the conversation stays; results wait for a reconnect)."""

    type: Literal["hangup"]


class StatusRequest(_Message):
    """The client asks for a status event (used to tell when a conversation has settled)."""

    type: Literal["status"]


ClientMessage = Playout | Hangup | StatusRequest
_MESSAGE_TYPES = ("playout", "hangup", "status")
_CLIENT_MESSAGE: TypeAdapter[ClientMessage] = TypeAdapter(
    Annotated[ClientMessage, Field(discriminator="type")]
)
_FORMAT = f"send {SAMPLE_RATE // 1000} kHz mono PCM16 in multiples of {FRAME_BYTES} bytes (20 ms)"


def check_audio_message(size: int, *, max_bytes: int = MAX_AUDIO_BYTES) -> ProtocolViolation | None:
    """None if a binary message of `size` bytes is valid caller audio, else what is wrong."""
    if size > max_bytes:
        return ProtocolViolation(
            "message_too_big",
            f"audio message of {size} bytes is too big: at most {max_bytes} bytes "
            f"({max_bytes / (2 * SAMPLE_RATE):g} s) per message",
            CloseCode.MESSAGE_TOO_BIG,
        )
    if size == 0 or size % FRAME_BYTES:
        return ProtocolViolation("bad_audio_frame", f"audio message of {size} bytes: {_FORMAT}")
    return None


def parse_text_message(
    text: str, *, max_bytes: int = MAX_TEXT_BYTES
) -> ClientMessage | ProtocolViolation:
    """Parse one text frame from the client, or say what is wrong with it."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return ProtocolViolation(
            "message_too_big",
            f"text message of {size} bytes is too big: at most {max_bytes} bytes",
            CloseCode.MESSAGE_TOO_BIG,
        )
    try:
        data = json.loads(text)
    except ValueError:
        return ProtocolViolation(
            "bad_json", f"text message is not JSON ({text[:40]!r}); {_expected()}"
        )
    kind = data.get("type") if isinstance(data, dict) else None
    if kind not in _MESSAGE_TYPES:
        got = f"type {kind!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        return ProtocolViolation("unknown_message", f"unknown message ({got}); {_expected()}")
    try:
        return _CLIENT_MESSAGE.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(describe_errors(exc, root="message"))
        return ProtocolViolation("bad_message", f"bad {kind!r} message: {problems}")


def error_event(violation: ProtocolViolation) -> dict[str, Any]:
    """The JSON error frame that tells the client what it did wrong."""
    return {"type": "error", "code": violation.code, "message": violation.message}


def _expected() -> str:
    return (
        'expected JSON like {"type": "playout", "id": "..."}, {"type": "hangup"} '
        'or {"type": "status"}'
    )


# -- the transport ------------------------------------------------------------------------


class OutboundSocket(Protocol):
    """The sending half of a WebSocket (Starlette's `WebSocket` fits)."""

    async def send_bytes(self, data: bytes) -> None: ...

    async def send_text(self, data: str) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


_Outgoing = bytes | str | _Close


class WebSocketTransport:
    """A `CallTransport` whose frames go through one ordered queue to a socket.

    The voice session and the server put frames in (`send_audio`, `mark`, `send_event`,
    `close`); `pump` is the only writer, so frames never interleave and a mark always
    follows the audio it marks. `clear` drops audio still queued here and tells the client
    to drop what it buffered. After `close` (or once the socket fails) sends are ignored.
    """

    def __init__(self, *, sample_rate: int = SAMPLE_RATE) -> None:
        self._sample_rate = sample_rate
        self._queue: deque[_Outgoing] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self.audio_bytes_sent = 0

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio in both directions."""
        return self._sample_rate

    @property
    def closing(self) -> bool:
        """True once `close` was called or the socket failed."""
        return self._closing

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio for the client."""
        self._put(bytes(pcm16))

    async def mark(self, speech_id: str) -> None:
        """Ask the client to ack `speech_id` once everything sent so far has played."""
        self._put(json.dumps({"type": "speech_mark", "id": speech_id}))

    async def clear(self) -> None:
        """Drop unsent agent audio and tell the client to flush its playback buffer."""
        if self._closing:
            return
        kept = [item for item in self._queue if not isinstance(item, bytes)]
        self._queue = deque(kept)
        self._put(json.dumps({"type": "clear"}))

    async def send_event(self, event: dict[str, Any]) -> None:
        """Queue a JSON event for the client."""
        self.send_event_nowait(event)

    def send_event_nowait(self, event: dict[str, Any]) -> None:
        """`send_event` for synchronous callers (hooks, the reader loop)."""
        self._put(json.dumps(event, default=str))

    def close(self, code: int = CloseCode.NORMAL, reason: str = "") -> None:
        """Send what is queued, then close the socket with `code` (reason cut to 123 bytes)."""
        if self._closing:
            return
        self._queue.append(_Close(int(code), _close_reason(reason)))
        self._closing = True
        self._wakeup.set()

    async def pump(self, socket: OutboundSocket) -> None:
        """Send queued frames in order until closed. A socket error ends the pump (and the
        transport: later frames are dropped); the caller treats that as a hangup."""
        try:
            while True:
                while not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                item = self._queue.popleft()
                if isinstance(item, bytes):
                    await socket.send_bytes(item)
                    self.audio_bytes_sent += len(item)
                elif isinstance(item, str):
                    await socket.send_text(item)
                else:
                    await socket.close(item.code, item.reason)
                    return
        finally:
            self._closing = True
            self._queue.clear()

    def _put(self, item: _Outgoing) -> None:
        if self._closing:
            return  # the call is ending: nobody will hear it
        self._queue.append(item)
        self._wakeup.set()


def _close_reason(reason: str) -> str:
    # RFC 6455 allows 123 bytes of reason; cut on a character boundary.
    encoded = reason.encode("utf-8")
    if len(encoded) <= 123:
        return reason
    return encoded[:120].decode("utf-8", "ignore") + "..."
