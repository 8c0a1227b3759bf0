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

Every text frame, both ways, is a model of `voicehub.voice.events`.

A malformed message gets an error frame and is dropped; the call goes on. A message too big
to be sane closes the call with 1009. The validators below are pure functions, tested
without sockets; `WebSocketTransport` only queues frames and `pump`s them to a socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from voicehub.transports.call_events import BadClientMessage, ClientMessage, parse_client_message
from voicehub.transports.pump import OutboundSocket, SendQueue
from voicehub.voice.audio import frame_bytes
from voicehub.voice.events import (
    FRAME_BYTES,
    SAMPLE_RATE,
    CallError,
    ClearAudio,
    ServerEvent,
    SpeechMark,
)

__all__ = [
    "CALL_RATES",
    "MAX_AUDIO_BYTES",
    "MAX_TEXT_BYTES",
    "CloseCode",
    "OutboundSocket",
    "ProtocolViolation",
    "WebSocketTransport",
    "call_rate",
    "check_audio_message",
    "error_event",
    "parse_text_message",
]

MAX_AUDIO_BYTES = 50 * FRAME_BYTES  # one second per message
MAX_TEXT_BYTES = 4096  # acks and commands are tiny; anything bigger is a broken client


class CloseCode(IntEnum):
    """Close codes the server uses (4xxx are application codes, mirroring HTTP)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    SERVICE_RESTART = 1012  # the call goes on elsewhere: reconnect now, same conversation
    TRY_AGAIN_LATER = 1013  # the server drains or is busy: call again (another instance)
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


CALL_RATES = (8000, 16000, 24000)
"""The PCM16 rates a WebSocket call may choose with `?rate=` (16 kHz when it does not);
24 kHz is the OpenAI Realtime model's own: a realtime desk then resamples nothing."""


def call_rate(value: str | None) -> int | ProtocolViolation:
    """The sample rate a call's `rate` query parameter asks for (None: the default)."""
    if value is None or value == "":
        return SAMPLE_RATE
    if not value.isdigit() or int(value) not in CALL_RATES:
        rates = ", ".join(str(rate) for rate in CALL_RATES)
        return ProtocolViolation(
            "bad_rate", f"rate {value[:20]!r} is not offered: choose one of {rates} (Hz)"
        )
    return int(value)


def check_audio_message(
    size: int, *, max_bytes: int = MAX_AUDIO_BYTES, sample_rate: int = SAMPLE_RATE
) -> ProtocolViolation | None:
    """None if a binary message of `size` bytes is valid caller audio at `sample_rate`,
    else what is wrong."""
    if size > max_bytes:
        return ProtocolViolation(
            "message_too_big",
            f"audio message of {size} bytes is too big: at most {max_bytes} bytes "
            f"({max_bytes / (2 * sample_rate):g} s) per message",
            CloseCode.MESSAGE_TOO_BIG,
        )
    frame = frame_bytes(sample_rate)
    if size == 0 or size % frame:
        return ProtocolViolation(
            "bad_audio_frame",
            f"audio message of {size} bytes: send {sample_rate / 1000:g} kHz mono PCM16 in "
            f"multiples of {frame} bytes (20 ms)",
        )
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
        return parse_client_message(text)
    except BadClientMessage as bad:
        return ProtocolViolation(bad.code, bad.message)  # the call goes on


def error_event(violation: ProtocolViolation) -> CallError:
    """The error event that tells the client what it did wrong."""
    return CallError(code=violation.code, message=violation.message)


# -- the transport ------------------------------------------------------------------------


_CLEAR = ClearAudio().to_wire()


def _is_audio(frame: bytes | str) -> bool:
    return isinstance(frame, bytes)


class WebSocketTransport:
    """A `CallTransport` whose frames go through one ordered queue to a socket.

    The voice session and the server put frames in (`send_audio`, `mark`, `send_event`,
    `close`); `pump` is the only writer (`voicehub.transports.pump.SendQueue`), so frames
    never interleave and a mark always follows the audio it marks. `clear` drops audio
    still queued here and tells the client to drop what it buffered. After `close` (or once
    the socket fails) sends are ignored.
    """

    def __init__(self, *, sample_rate: int = SAMPLE_RATE) -> None:
        self._sample_rate = sample_rate
        self._queue = SendQueue()

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio in both directions."""
        return self._sample_rate

    @property
    def closing(self) -> bool:
        """True once `close` was called or the socket failed."""
        return self._queue.closing

    @property
    def audio_bytes_sent(self) -> int:
        return self._queue.bytes_sent

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio for the client."""
        self._queue.put(bytes(pcm16))

    async def mark(self, speech_id: str) -> None:
        """Ask the client to ack `speech_id` once everything sent so far has played."""
        self._queue.put(SpeechMark(id=speech_id).to_wire())

    async def clear(self) -> None:
        """Drop unsent agent audio and tell the client to flush its playback buffer."""
        if self._queue.closing:
            return
        self._queue.drop(_is_audio)
        self._queue.put(_CLEAR)

    async def send_event(self, event: ServerEvent) -> None:
        """Queue an event for the client."""
        self.send_event_nowait(event)

    def send_event_nowait(self, event: ServerEvent) -> None:
        """`send_event` for synchronous callers (hooks, the reader loop)."""
        self._queue.put(event.to_wire())

    async def hang_up(self, reason: str) -> None:
        """The agent ends the call: what is queued goes out, then the socket closes."""
        self.close(CloseCode.NORMAL, reason)

    def close(self, code: int = CloseCode.NORMAL, reason: str = "") -> None:
        """Send what is queued, then close the socket with `code` (reason cut to 123 bytes)."""
        self._queue.close(code, reason)

    async def pump(self, socket: OutboundSocket) -> None:
        """Send queued frames in order until closed. A socket error ends the pump (and the
        transport: later frames are dropped); the caller treats that as a hangup."""
        await self._queue.pump(socket)
