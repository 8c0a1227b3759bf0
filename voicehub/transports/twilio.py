"""Twilio Media Streams: the pure message parser and the `CallTransport` over the stream.

Twilio (a WebSocket *client*) sends JSON text frames: `connected`, `start` (stream and call
sids, the `<Parameter>`s of our TwiML, the media format), `media` (base64 mu-law 8 kHz,
about 20 ms each), `dtmf`, `mark` (echoed once the audio before it has played) and `stop`.
We send `media`, `mark` and `clear`, each with the stream's `streamSid`; anything else
gets a Twilio warning, so JSON events meant for browsers are not sent down this line.

A malformed or out-of-order message is a `StreamProblem`: logged and dropped, the call
goes on (Twilio does not read error frames). The parser, `StreamReader` and `TwilioCodec`
are sans-I/O; the transport is the one every carrier shares
(`voicehub.transports.phone.PhoneStreamTransport`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from voicehub.transports.phone import (
    CallerAudio,
    KeyPressed,
    PhoneStreamTransport,
    PlayoutMarked,
    StreamEvent,
    StreamNoted,
    StreamProblem,
    StreamStarted,
    StreamStopped,
)
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
    "TwilioCodec",
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


# -- the codec ----------------------------------------------------------------------------


_WIRE = WireAudio("mulaw", TWILIO_RATE)


class TwilioCodec:
    """Media Streams as a `voicehub.transports.phone.PhoneCodec`."""

    carrier = "twilio"
    marks_survive_clear = True  # Twilio echoes the pending marks on `clear`
    playout_lead: float | None = None  # no documented bound on its buffer

    def __init__(self, reader: StreamReader | None = None) -> None:
        self.reader = reader or StreamReader()
        self._started: StreamStarted | None = None
        if self.reader.start is not None:
            self._started = _started(self.reader.start)

    @classmethod
    def for_stream(cls, stream_sid: str, call_sid: str = "") -> TwilioCodec:
        """A codec for a stream already started elsewhere (tests, a known stream)."""
        info = StartInfo(
            streamSid=stream_sid,
            callSid=call_sid,
            mediaFormat=MediaFormat(encoding="audio/x-mulaw", sampleRate=TWILIO_RATE),
        )
        return cls(StreamReader(start=Start(event="start", streamSid=stream_sid, start=info)))

    @property
    def started(self) -> StreamStarted | None:
        return self._started

    @property
    def stream_sid(self) -> str:
        return self._started.stream_id if self._started is not None else ""

    def read(self, frame: str | bytes) -> StreamEvent | StreamProblem:
        message = self.reader.accept(parse_stream_message(frame))
        if isinstance(message, StreamProblem):
            return message
        if isinstance(message, Media):
            if message.media.track not in ("inbound", "inbound_track"):
                return StreamNoted(f"media of track {message.media.track!r}")
            audio = decode_payload(message.media.payload)
            if isinstance(audio, StreamProblem):
                self.reader.problems += 1
                return audio
            return CallerAudio(audio)
        if isinstance(message, Start):
            self._started = _started(message)
            return self._started
        if isinstance(message, Mark):
            return PlayoutMarked(message.mark.name)
        if isinstance(message, Dtmf):
            return KeyPressed(message.dtmf.digit)
        if isinstance(message, Stop):
            return StreamStopped()
        return StreamNoted("connected")

    def audio(self, data: bytes) -> str:
        payload = base64.b64encode(data).decode("ascii")
        return _json(
            {"event": "media", "streamSid": self.stream_sid, "media": {"payload": payload}}
        )

    def mark(self, name: str) -> str:
        return _json({"event": "mark", "streamSid": self.stream_sid, "mark": {"name": name}})

    def clear(self) -> str:
        return _json({"event": "clear", "streamSid": self.stream_sid})

    def is_audio(self, frame: str | bytes) -> bool:
        return isinstance(frame, str) and frame.startswith('{"event":"media"')


def _started(start: Start) -> StreamStarted:
    info = start.start
    return StreamStarted(start.streamSid, info.callSid, dict(info.customParameters), _WIRE)


def _json(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))


class TwilioMediaTransport(PhoneStreamTransport):
    """The transport of one Twilio stream (`PhoneStreamTransport` on a `TwilioCodec`)."""

    def __init__(
        self,
        stream_sid: str | TwilioCodec,
        *,
        sample_rate: int = TWILIO_RATE,
        call_sid: str = "",
    ) -> None:
        codec = (
            stream_sid
            if isinstance(stream_sid, TwilioCodec)
            else TwilioCodec.for_stream(stream_sid, call_sid)
        )
        super().__init__(codec, sample_rate=sample_rate, call_id=call_sid)
        self.stream_sid = codec.stream_sid
