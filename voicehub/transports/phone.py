"""A carrier's media stream as a `CallTransport`: one transport over any carrier's codec.

Each carrier (Twilio, Telnyx, Plivo, Vonage) speaks its own WebSocket dialect for the same
things: the stream starts (ids, custom parameters, the audio format), caller audio arrives,
a mark we sent comes back once the audio before it has played, a key was pressed, the
stream stops. Its codec (`voicehub.transports.twilio`, `.telnyx`, `.plivo`, `.vonage`) is
sans-I/O: `read` turns one frame into one of the `StreamEvent`s below (or a
`StreamProblem`: logged and dropped, the call goes on), and `audio` / `mark` / `clear`
build the frames we send. `PhoneStreamTransport` does the rest the same way for all of
them: PCM16 at the session's rate to and from the wire's format, 20 ms framing, marks after
the audio they mark, barge-in (`clear` drops the unsent audio here and asks the carrier to
flush its buffer), all through the one `SendQueue`. A carrier whose playback buffer is
bounded (Vonage) names a `playout_lead`: its audio is paced on the transport's clock
(`voicehub.transports.phone_pacing`), never more than that far ahead of the caller's ear.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from voicehub.core.clock import Clock, SystemClock
from voicehub.transports.phone_pacing import PlayoutPacer
from voicehub.transports.pump import OutboundSocket, SendQueue
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
    "CallerAudio",
    "KeyPressed",
    "PhoneCodec",
    "PhoneStreamTransport",
    "PlaybackCleared",
    "PlayoutMarked",
    "StreamEvent",
    "StreamNoted",
    "StreamProblem",
    "StreamStarted",
    "StreamStopped",
    "json_frame",
    "validation_problems",
]

MAX_FRAME_CHARS = 64_000  # a media frame is ~300 characters; anything near this is broken

Frame = bytes | str


@dataclass(frozen=True, slots=True)
class StreamProblem:
    """Why a frame from the carrier was dropped (for the log)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class StreamStarted:
    """The stream is up: its ids, the parameters our answer gave it, the audio format."""

    stream_id: str
    call_id: str  # what the carrier's REST API acts on (transfers, keypad tones, hang-up)
    parameters: Mapping[str, str] = field(default_factory=dict)
    wire: WireAudio = field(default_factory=lambda: WireAudio("mulaw", 8000))


@dataclass(frozen=True, slots=True)
class CallerAudio:
    """Caller audio in the wire's format (`StreamStarted.wire`)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class PlayoutMarked:
    """A mark we sent came back: everything before it has played to the caller."""

    name: str


@dataclass(frozen=True, slots=True)
class KeyPressed:
    """The caller pressed a key (0-9, *, #, A-D)."""

    digit: str


@dataclass(frozen=True, slots=True)
class PlaybackCleared:
    """The carrier flushed its playback buffer, as we asked."""


@dataclass(frozen=True, slots=True)
class StreamStopped:
    """The carrier ended the stream (the caller hung up, or the call moved on)."""


@dataclass(frozen=True, slots=True)
class StreamNoted:
    """A frame with nothing to act on (`connected`, an error report): `what` is logged."""

    what: str


StreamEvent = (
    StreamStarted
    | CallerAudio
    | PlayoutMarked
    | KeyPressed
    | PlaybackCleared
    | StreamStopped
    | StreamNoted
)


class PhoneCodec(Protocol):
    """One carrier's media-stream wire format, sans I/O (see the module)."""

    @property
    def carrier(self) -> str:
        """ "twilio", "telnyx", "plivo", "vonage": the call's kind."""
        ...

    @property
    def started(self) -> StreamStarted | None:
        """The stream's start, once read."""
        ...

    @property
    def marks_survive_clear(self) -> bool:
        """Whether the carrier still answers the marks a `clear` dropped (Twilio and Telnyx
        echo them at once); where it does not, the transport confirms them itself."""
        ...

    @property
    def playout_lead(self) -> float | None:
        """Seconds of audio the carrier may hold ahead of the caller's ear (its buffer is
        bounded): audio is paced to stay under it. None: sent as fast as it comes."""
        ...

    def read(self, frame: Frame) -> StreamEvent | StreamProblem:
        """One frame from the carrier, checked against the stream so far."""
        ...

    def audio(self, data: bytes) -> Frame:
        """The frame carrying `data` (the wire's format, at most 20 ms) to the caller."""
        ...

    def mark(self, name: str) -> Frame:
        """The frame asking the carrier to tell us when everything before it has played."""
        ...

    def clear(self) -> Frame:
        """The frame asking the carrier to drop the audio it buffered (barge-in)."""
        ...

    def is_audio(self, frame: Frame) -> bool:
        """Whether `frame` (one this codec built) carries audio: `clear` drops those."""
        ...


def json_frame(
    frame: str | bytes, carrier: str, events: Collection[str]
) -> dict[str, Any] | StreamProblem:
    """A carrier's JSON text frame whose `event` is one of `events`, or what is wrong."""
    if isinstance(frame, bytes):
        return StreamProblem(
            "binary_frame", f"binary frame of {len(frame)} bytes: {carrier} sends JSON"
        )
    if len(frame) > MAX_FRAME_CHARS:
        return StreamProblem("frame_too_big", f"text frame of {len(frame)} characters")
    try:
        data: Any = json.loads(frame)
    except ValueError:
        return StreamProblem("bad_json", f"frame is not JSON: {frame[:40]!r}")
    kind = data.get("event") if isinstance(data, dict) else None
    if kind not in events:
        got = f"event {kind!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        return StreamProblem(
            "unknown_event", f"unknown frame ({got}); expected one of {', '.join(events)}"
        )
    found: dict[str, Any] = data
    return found


def validation_problems(exc: ValidationError) -> str:
    """A frame's validation errors, one `field: message` each."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'frame'}: {e['msg']}" for e in exc.errors()
    )


_FRAME_MS = 20


def _wire_frame_bytes(wire: WireAudio) -> int:
    per_sample = 1 if wire.encoding == "mulaw" else 2
    return wire.sample_rate * _FRAME_MS // 1000 * per_sample


class PhoneStreamTransport:
    """A `CallTransport` speaking `codec` on one started stream (see the module).

    The session sees PCM16 at `sample_rate`; the wire is `codec.started.wire` (G.711 mu-law
    at 8 kHz, or PCM16 at 8 or 16 kHz). `mark` confirms playout through the carrier: its
    echo (`PlayoutMarked`) is handed to the session by the server's reader. JSON events
    meant for browsers are dropped: carriers reject frames they do not know.
    """

    def __init__(
        self,
        codec: PhoneCodec,
        *,
        sample_rate: int = 8000,
        call_id: str = "",
        clock: Clock | None = None,
        marks_dropped: Callable[[str], None] | None = None,
    ) -> None:
        started = codec.started
        if started is None:
            raise ValueError("the stream has not started: read its start frame first")
        self.codec = codec
        self.stream_id = started.stream_id
        self.call_id = call_id or started.call_id
        self._wire = started.wire
        self._sample_rate = sample_rate
        rate = started.wire.sample_rate
        self._down = Resampler(sample_rate, rate) if sample_rate != rate else None
        self._up = Resampler(rate, sample_rate) if sample_rate != rate else None
        self._frame = _wire_frame_bytes(started.wire)
        self._pending = b""  # wire audio short of a whole 20 ms frame
        lead = codec.playout_lead
        self._pacer = (
            None
            if lead is None
            else PlayoutPacer(clock or SystemClock(), lead=lead, is_audio=codec.is_audio)
        )
        self._queue = SendQueue(pacer=self._pacer)
        self._unconfirmed: list[str] = []  # marks sent, not yet echoed
        self._confirmed_by_clear: set[str] = set()
        # Told each mark a `clear` dropped where the carrier will never answer it (on the
        # server: the call's session, as `playout_confirmed`).
        self.marks_dropped = marks_dropped
        self.media_frames_sent = 0
        self.events_dropped = 0

    @property
    def carrier(self) -> str:
        return self.codec.carrier

    @property
    def call_sid(self) -> str:
        """Twilio's name for `call_id`."""
        return self.call_id

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio the session sends and receives."""
        return self._sample_rate

    @property
    def wire_audio(self) -> WireAudio:
        """The wire's own format (see `voicehub.voice.transport`)."""
        return self._wire

    @property
    def closing(self) -> bool:
        return self._queue.closing

    def queued(self) -> list[Frame]:
        """The frames waiting to be sent, in order (tests)."""
        return self._queue.frames()

    def caller_audio(self, data: bytes) -> bytes:
        """Caller audio in the wire's format as PCM16 at `sample_rate`."""
        pcm = ulaw2lin(data) if self._wire.encoding == "mulaw" else data[: len(data) // 2 * 2]
        if self._up is None:
            return pcm
        return int16_to_pcm16(self._up.push(pcm16_to_int16(pcm)))

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio (PCM16 at `sample_rate`) as 20 ms frames of the wire's format."""
        if self._down is not None:
            pcm16 = int16_to_pcm16(self._down.push(pcm16_to_int16(pcm16)))
        await self.send_wire_audio(lin2ulaw(pcm16) if self._wire.encoding == "mulaw" else pcm16)

    async def send_wire_audio(self, data: bytes) -> None:
        """Queue agent audio already in the wire's format, as 20 ms frames."""
        data = self._pending + data
        whole = len(data) - len(data) % self._frame
        for at in range(0, whole, self._frame):
            self._media(data[at : at + self._frame])
        self._pending = data[whole:]

    async def mark(self, speech_id: str) -> None:
        """Send what is left of the segment, then a mark named `speech_id`."""
        if self._pending:
            self._media(self._pending)  # a short last frame (codecs pad it if they must)
            self._pending = b""
        if self._queue.put(self.codec.mark(speech_id)):
            self._unconfirmed.append(speech_id)

    def mark_echoed(self, name: str) -> bool:
        """The carrier echoed mark `name`; False when it is one `clear` confirmed already
        (a late echo, to be ignored)."""
        if name in self._confirmed_by_clear:
            self._confirmed_by_clear.discard(name)
            return False
        if name in self._unconfirmed:
            self._unconfirmed.remove(name)
        return True

    async def clear(self) -> None:
        """Drop unsent audio and have the carrier flush what it buffered (barge-in)."""
        if self._queue.closing:
            return
        self._pending = b""
        self._queue.drop(self.codec.is_audio)
        if self._queue.put(self.codec.clear()) and self._pacer is not None:
            self._pacer.flushed()
        if self.codec.marks_survive_clear:
            return
        dropped, self._unconfirmed = self._unconfirmed, []
        self._confirmed_by_clear.update(dropped)
        for name in dropped:
            if self.marks_dropped is not None:
                self.marks_dropped(name)

    async def send_event(self, event: ServerEvent) -> None:
        """Dropped: carriers take only their own frames (others are an error there)."""
        self.send_event_nowait(event)

    def send_event_nowait(self, event: ServerEvent) -> None:
        self.events_dropped += 1

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send what is queued, then close the socket (the carrier's next verb then runs)."""
        self._queue.close(code, reason)

    async def pump(self, socket: OutboundSocket) -> None:
        """Send queued frames in order until closed; a socket error ends the transport."""
        await self._queue.pump(socket)

    def _media(self, data: bytes) -> None:
        if self._queue.put(self.codec.audio(data)):
            self.media_frames_sent += 1
