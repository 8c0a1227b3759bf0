"""Telnyx media streaming (bidirectional, RTP mode) as a sans-I/O codec.

Telnyx (a WebSocket *client*) sends JSON text frames: `connected`, `start` (the stream id at
the top level; the call control id, our `<Parameter>`s as `custom_parameters` and the media
format inside `start`), `media` (base64 RTP payloads: PCMU at 8 kHz, as our TeXML asks),
`dtmf`, `mark` (echoed once the audio before it has played, or at once when nothing is
queued), `error` and `stop`. Media frames may arrive out of order: they carry a
`sequence_number`, and the codec puts a few back in order (`REORDER_WINDOW`). We send
`media`, `mark` and `clear`; Telnyx returns the queued marks on `clear`, as Twilio does.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voicehub.transports.phone import (
    CallerAudio,
    KeyPressed,
    PlayoutMarked,
    StreamEvent,
    StreamNoted,
    StreamProblem,
    StreamStarted,
    StreamStopped,
    json_frame,
    validation_problems,
)
from voicehub.voice.transport import WireAudio

__all__ = ["REORDER_WINDOW", "TelnyxCodec"]

REORDER_WINDOW = 4  # media frames held back to put late ones in order (80 ms)
_EVENTS = ("connected", "start", "media", "dtmf", "mark", "error", "stop")
_ENCODINGS = {"PCMU": "mulaw"}  # what our TeXML asks for; others are refused with a reason


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Format(_Loose):
    encoding: str
    sample_rate: int
    channels: int = 1


class _StartInfo(_Loose):
    call_control_id: str
    custom_parameters: dict[str, str] = Field(default_factory=dict)
    media_format: _Format


class _Start(_Loose):
    stream_id: str
    start: _StartInfo


class _Media(_Loose):
    payload: str
    track: str = "inbound"


class _MediaFrame(_Loose):
    sequence_number: int | None = None
    media: _Media


class _Digit(_Loose):
    digit: Annotated[str, Field(pattern=r"^[0-9*#A-Da-d]$")]


class _DtmfFrame(_Loose):
    dtmf: _Digit


class _MarkName(_Loose):
    name: Annotated[str, Field(min_length=1, max_length=200)]


class _MarkFrame(_Loose):
    mark: _MarkName


class TelnyxCodec:
    """Telnyx media streaming as a `voicehub.transports.phone.PhoneCodec`."""

    carrier = "telnyx"
    marks_survive_clear = True  # Telnyx returns the queued marks on `clear`
    playout_lead: float | None = None  # no documented bound on its buffer

    def __init__(self) -> None:
        self._started: StreamStarted | None = None
        self._stopped = False
        self._held: dict[int, bytes] = {}  # media frames ahead of the next expected one
        self._next: int | None = None  # the sequence number expected next
        self.problems = 0

    @property
    def started(self) -> StreamStarted | None:
        return self._started

    def read(self, frame: str | bytes) -> StreamEvent | StreamProblem:
        event = self._read(frame)
        if isinstance(event, StreamProblem):
            self.problems += 1
        return event

    def _read(self, frame: str | bytes) -> StreamEvent | StreamProblem:
        data = json_frame(frame, "Telnyx", _EVENTS)
        if isinstance(data, StreamProblem):
            return data
        if isinstance(data.get("sequence_number"), str) and data["sequence_number"].isdigit():
            data["sequence_number"] = int(data["sequence_number"])  # a string on the wire
        kind = data["event"]
        if self._stopped:
            return StreamProblem("after_stop", f"{kind!r} after 'stop'")
        try:
            if kind == "connected":
                return StreamNoted("connected")
            if kind == "start":
                return self._start(_Start.model_validate(data))
            if self._started is None:
                return StreamProblem("out_of_order", f"{kind!r} before 'start'")
            if kind == "media":
                return self._media(_MediaFrame.model_validate(data))
            if kind == "dtmf":
                return KeyPressed(_DtmfFrame.model_validate(data).dtmf.digit)
            if kind == "mark":
                return PlayoutMarked(_MarkFrame.model_validate(data).mark.name)
            if kind == "error":
                return StreamNoted(f"Telnyx reported an error: {json.dumps(data)[:200]}")
        except ValidationError as exc:
            return StreamProblem("bad_frame", f"bad {kind!r} frame: {validation_problems(exc)}")
        self._stopped = True
        return StreamStopped()

    def _start(self, start: _Start) -> StreamEvent | StreamProblem:
        if self._started is not None:
            return StreamProblem("out_of_order", "a second 'start'")
        fmt = start.start.media_format
        encoding = _ENCODINGS.get(fmt.encoding.upper())
        if encoding is None or fmt.sample_rate != 8000:
            return StreamProblem(
                "bad_format", f"media format {fmt.encoding}/{fmt.sample_rate}: expected PCMU 8000"
            )
        info = start.start
        self._started = StreamStarted(
            start.stream_id,
            info.call_control_id,
            dict(info.custom_parameters),
            WireAudio("mulaw", 8000),
        )
        return self._started

    def _media(self, frame: _MediaFrame) -> StreamEvent | StreamProblem:
        if frame.media.track not in ("inbound", "inbound_track"):
            return StreamNoted(f"media of track {frame.media.track!r}")
        try:
            audio = base64.b64decode(frame.media.payload, validate=True)
        except (binascii.Error, ValueError):
            return StreamProblem("bad_payload", "media payload is not base64")
        number = frame.sequence_number
        if number is None:
            return CallerAudio(audio)
        if self._next is None:
            self._next = number
        if number < self._next:
            return StreamNoted(f"media frame {number} came after its successor: dropped")
        self._held[number] = audio
        released = bytearray()
        while self._next in self._held or len(self._held) > REORDER_WINDOW:
            if self._next not in self._held:  # lost: go on from the earliest held
                self._next = min(self._held)
            released += self._held.pop(self._next)
            self._next += 1
        if not released:
            return StreamNoted(f"media frame {number} held to put it in order")
        return CallerAudio(bytes(released))

    def audio(self, data: bytes) -> str:
        return _dump({"event": "media", "media": {"payload": base64.b64encode(data).decode()}})

    def mark(self, name: str) -> str:
        return _dump({"event": "mark", "mark": {"name": name}})

    def clear(self) -> str:
        return _dump({"event": "clear"})

    def is_audio(self, frame: str | bytes) -> bool:
        return isinstance(frame, str) and frame.startswith('{"event":"media"')


def _dump(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))
