"""Twilio Media Streams: the pure message parser and the `CallTransport` over the stream.

Twilio (a WebSocket *client*) sends JSON text frames: `connected`, `start` (stream and call
sids, the `<Parameter>`s of our TwiML, the media format), `media` (base64 mu-law 8 kHz,
about 20 ms each), `dtmf`, `mark` (echoed once the audio before it has played) and `stop`.
We send `media`, `mark` and `clear`, each with the stream's `streamSid`; anything else
gets a Twilio warning, so JSON events meant for browsers are not sent down this line.

A malformed or out-of-order message is a `StreamProblem`: logged and dropped, the call
goes on (Twilio does not read error frames). The parser and `StreamReader` are sans-I/O;
`TwilioMediaTransport` queues frames and `pump`s them to a socket, like the WebSocket one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from voicehub.transports.websocket import OutboundSocket
from voicehub.voice.audio import (
    Resampler,
    int16_to_pcm16,
    lin2ulaw,
    pcm16_to_int16,
    ulaw2lin,
)
from voicehub.voice.events import ServerEvent
from voicehub.voice.transport import WireAudio

__all__ = [
    "MAX_FRAME_CHARS",
    "TWILIO_RATE",
    "Connected",
    "Dtmf",
    "Mark",
    "Media",
    "Start",
    "Stop",
    "StreamMessage",
    "StreamProblem",
    "StreamReader",
    "TwilioMediaTransport",
    "parse_stream_message",
]

TWILIO_RATE = 8000
_FRAME = 160  # 20 ms of 8 kHz mu-law, one byte a sample
MAX_FRAME_CHARS = 64_000  # a media frame is ~300 characters; anything near this is broken


class _Loose(BaseModel):
    # Twilio adds fields over time; unknown ones are ignored, known ones are checked.
    model_config = ConfigDict(extra="ignore", frozen=True)


class MediaFormat(_Loose):
    encoding: str
    sampleRate: int  # Twilio's field names
    channels: int = 1


class StartInfo(_Loose):
    streamSid: str
    callSid: str
    accountSid: str = ""
    tracks: tuple[str, ...] = ("inbound",)
    customParameters: dict[str, str] = Field(default_factory=dict)
    mediaFormat: MediaFormat


class MediaChunk(_Loose):
    payload: str
    track: str = "inbound"
    chunk: str | None = None
    timestamp: str | None = None


class DigitInfo(_Loose):
    digit: Annotated[str, Field(pattern=r"^[0-9*#A-Da-d]$")]


class MarkInfo(_Loose):
    name: Annotated[str, Field(min_length=1, max_length=200)]


class Connected(_Loose):
    event: Literal["connected"]
    protocol: str = "Call"


class Start(_Loose):
    event: Literal["start"]
    streamSid: str
    start: StartInfo


class Media(_Loose):
    event: Literal["media"]
    streamSid: str
    media: MediaChunk


class Dtmf(_Loose):
    event: Literal["dtmf"]
    streamSid: str
    dtmf: DigitInfo


class Mark(_Loose):
    event: Literal["mark"]
    streamSid: str
    mark: MarkInfo


class Stop(_Loose):
    event: Literal["stop"]
    streamSid: str = ""


StreamMessage = Connected | Start | Media | Dtmf | Mark | Stop
_EVENTS = ("connected", "start", "media", "dtmf", "mark", "stop")
_MESSAGE: TypeAdapter[StreamMessage] = TypeAdapter(
    Annotated[StreamMessage, Field(discriminator="event")]
)


@dataclass(frozen=True, slots=True)
class StreamProblem:
    """Why a frame from Twilio was dropped (for the log)."""

    code: str
    message: str


def parse_stream_message(text: str | bytes) -> StreamMessage | StreamProblem:
    """Parse one frame from Twilio, or say what is wrong with it."""
    if isinstance(text, bytes):
        return StreamProblem(
            "binary_frame", f"binary frame of {len(text)} bytes: Twilio sends JSON"
        )
    if len(text) > MAX_FRAME_CHARS:
        return StreamProblem("frame_too_big", f"text frame of {len(text)} characters")
    try:
        data = json.loads(text)
    except ValueError:
        return StreamProblem("bad_json", f"frame is not JSON: {text[:40]!r}")
    kind = data.get("event") if isinstance(data, dict) else None
    if kind not in _EVENTS:
        got = f"event {kind!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        return StreamProblem("unknown_event", f"unknown frame ({got}); expected {_EVENTS}")
    try:
        return _MESSAGE.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'frame'}: {e['msg']}" for e in exc.errors()
        )
        return StreamProblem("bad_frame", f"bad {kind!r} frame: {problems}")


def decode_payload(payload: str) -> bytes | StreamProblem:
    """The mu-law bytes of a media payload (PCM16 at 8 kHz once through `ulaw2lin`)."""
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return StreamProblem("bad_payload", f"media payload is not base64 ({payload[:20]!r})")


@dataclass
class StreamReader:
    """The inbound state machine: `connected`, then one `start`, media/dtmf/mark, `stop`.

    `accept` returns the message if it fits the stream so far, else a `StreamProblem`
    (a second `start`, media before `start`, a foreign `streamSid`, mu-law at another rate).
    """

    start: Start | None = None
    stopped: bool = False
    problems: int = 0
    _seen_connected: bool = field(default=False, repr=False)

    def accept(self, message: StreamMessage | StreamProblem) -> StreamMessage | StreamProblem:
        problem = self._check(message)
        if problem is not None:
            self.problems += 1
            return problem
        return message

    def _check(self, message: StreamMessage | StreamProblem) -> StreamProblem | None:
        if isinstance(message, StreamProblem):
            return message
        if self.stopped:
            return StreamProblem("after_stop", f"{message.event!r} after 'stop'")
        if isinstance(message, Connected):
            if self._seen_connected or self.start is not None:
                return StreamProblem("out_of_order", "a second 'connected'")
            self._seen_connected = True
            return None
        if isinstance(message, Start):
            if self.start is not None:
                return StreamProblem("out_of_order", "a second 'start'")
            fmt = message.start.mediaFormat
            if fmt.encoding != "audio/x-mulaw" or fmt.sampleRate != TWILIO_RATE:
                return StreamProblem(
                    "bad_format",
                    f"media format {fmt.encoding}/{fmt.sampleRate}: expected mu-law 8000",
                )
            self.start = message
            return None
        if self.start is None:
            return StreamProblem("out_of_order", f"{message.event!r} before 'start'")
        if isinstance(message, Stop):
            self.stopped = True
            return None
        if message.streamSid != self.start.streamSid:
            return StreamProblem(
                "wrong_stream", f"{message.event!r} for stream {message.streamSid!r}"
            )
        return None


# -- the transport ------------------------------------------------------------------------


_WIRE = WireAudio("mulaw", TWILIO_RATE)


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


class TwilioMediaTransport:
    """A `CallTransport` speaking Media Streams to one stream.

    The session sees PCM16 at `sample_rate` (8 kHz by default: no resampling, the offline
    stack takes phone audio as it is); it is converted to 8 kHz mu-law and sent in 20 ms
    `media` frames. `mark` sends a Twilio mark: Twilio echoes it once everything before it
    has played, and `mark_echoed` (called by the server's reader) confirms the playout.
    `clear` drops what is queued here and tells Twilio to flush its buffer.
    """

    def __init__(
        self, stream_sid: str, *, sample_rate: int = TWILIO_RATE, call_sid: str = ""
    ) -> None:
        self.stream_sid = stream_sid
        self.call_sid = call_sid  # the call the REST API acts on (transfers, keypad tones)
        self._sample_rate = sample_rate
        self._down = Resampler(sample_rate, TWILIO_RATE) if sample_rate != TWILIO_RATE else None
        self._up = Resampler(TWILIO_RATE, sample_rate) if sample_rate != TWILIO_RATE else None
        self._pending = b""  # mu-law short of a whole 20 ms frame
        self._queue: deque[str | _Close] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self.media_frames_sent = 0
        self.events_dropped = 0

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio the session sends and receives."""
        return self._sample_rate

    @property
    def closing(self) -> bool:
        return self._closing

    def caller_audio(self, ulaw: bytes) -> bytes:
        """Caller mu-law from a `media` frame as PCM16 at `sample_rate`."""
        pcm = ulaw2lin(ulaw)
        if self._up is None:
            return pcm
        return int16_to_pcm16(self._up.push(pcm16_to_int16(pcm)))

    @property
    def wire_audio(self) -> WireAudio:
        """Twilio's media: G.711 mu-law at 8 kHz (see `voice.transport`)."""
        return _WIRE

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio as 20 ms mu-law `media` frames."""
        if self._down is not None:
            pcm16 = int16_to_pcm16(self._down.push(pcm16_to_int16(pcm16)))
        await self.send_wire_audio(lin2ulaw(pcm16))

    async def send_wire_audio(self, ulaw: bytes) -> None:
        """Queue agent audio that is mu-law at 8 kHz already, as 20 ms `media` frames."""
        data = self._pending + ulaw
        whole = len(data) - len(data) % _FRAME
        for at in range(0, whole, _FRAME):
            self._media(data[at : at + _FRAME])
        self._pending = data[whole:]

    async def mark(self, speech_id: str) -> None:
        """Send what is left of the segment, then a mark named `speech_id`."""
        if self._pending:
            self._media(self._pending)  # a short last frame is fine for Twilio
            self._pending = b""
        self._send({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": speech_id}})

    async def clear(self) -> None:
        """Drop unsent audio and have Twilio flush what it buffered (barge-in)."""
        if self._closing:
            return
        self._pending = b""
        self._queue = deque(item for item in self._queue if not _is_media(item))
        self._send({"event": "clear", "streamSid": self.stream_sid})

    async def send_event(self, event: ServerEvent) -> None:
        """Dropped: Twilio accepts only media, mark and clear (others are warning 31951)."""
        self.send_event_nowait(event)

    def send_event_nowait(self, event: ServerEvent) -> None:
        self.events_dropped += 1

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send what is queued, then close the socket (Twilio then ends the `<Connect>`)."""
        if self._closing:
            return
        self._queue.append(_Close(int(code), reason[:120]))
        self._closing = True
        self._wakeup.set()

    async def pump(self, socket: OutboundSocket) -> None:
        """Send queued frames in order until closed; a socket error ends the transport."""
        try:
            while True:
                while not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                item = self._queue.popleft()
                if isinstance(item, str):
                    await socket.send_text(item)
                else:
                    await socket.close(item.code, item.reason)
                    return
        finally:
            self._closing = True
            self._queue.clear()

    def _media(self, ulaw: bytes) -> None:
        payload = base64.b64encode(ulaw).decode("ascii")
        self._send({"event": "media", "streamSid": self.stream_sid, "media": {"payload": payload}})
        self.media_frames_sent += 1

    def _send(self, frame: dict[str, Any]) -> None:
        if self._closing:
            return
        self._queue.append(json.dumps(frame, separators=(",", ":")))
        self._wakeup.set()


def _is_media(item: str | _Close) -> bool:
    return isinstance(item, str) and item.startswith('{"event":"media"')
