"""Plivo audio streams (bidirectional) as a sans-I/O codec.

Plivo (a WebSocket *client*) sends JSON text frames: `start` (the call and stream ids, the
media format, our `extraHeaders` as one string), `media` (base64 mu-law at 8 kHz, as our
`<Stream contentType>` asks), `dtmf`, `playedStream` (a checkpoint we sent has played) and
`clearedAudio` (the buffer was flushed, as we asked). There is no stop frame: Plivo closes
the socket when the stream ends. We send `playAudio`, `checkpoint` (the mark) and
`clearAudio`. A checkpoint whose audio was cleared is never answered, so the transport
confirms the marks a `clear` dropped itself (`marks_survive_clear = False`).
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
    PlaybackCleared,
    PlayoutMarked,
    StreamEvent,
    StreamNoted,
    StreamProblem,
    StreamStarted,
    json_frame,
    validation_problems,
)
from voicehub.voice.transport import WireAudio

__all__ = ["PlivoCodec", "extra_headers"]

_EVENTS = ("start", "media", "dtmf", "playedStream", "clearedAudio")


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Format(_Loose):
    encoding: str
    sampleRate: int  # Plivo's field names


class _StartInfo(_Loose):
    callId: str
    streamId: str
    mediaFormat: _Format


class _Start(_Loose):
    start: _StartInfo
    extra_headers: str = ""


class _Media(_Loose):
    payload: str
    track: str = "inbound"


class _MediaFrame(_Loose):
    media: _Media


class _Digit(_Loose):
    digit: Annotated[str, Field(pattern=r"^[0-9*#A-Da-d]$")]


class _DtmfFrame(_Loose):
    dtmf: _Digit


class _Played(_Loose):
    name: Annotated[str, Field(min_length=1, max_length=200)]


def extra_headers(text: str) -> dict[str, str]:
    """`extraHeaders` as the start frame carries them: `k=v` pairs split by `;` or `,`."""
    pairs = (part.partition("=") for part in text.replace(";", ",").split(","))
    return {key.strip(): value.strip() for key, sep, value in pairs if sep and key.strip()}


class PlivoCodec:
    """Plivo audio streams as a `voicehub.transports.phone.PhoneCodec`."""

    carrier = "plivo"
    marks_survive_clear = False  # a cleared checkpoint is never answered
    playout_lead: float | None = None  # no documented bound on its buffer

    def __init__(self) -> None:
        self._started: StreamStarted | None = None
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
        data = json_frame(frame, "Plivo", _EVENTS)
        if isinstance(data, StreamProblem):
            return data
        kind = data["event"]
        try:
            if kind == "start":
                return self._start(_Start.model_validate(data))
            if self._started is None:
                return StreamProblem("out_of_order", f"{kind!r} before 'start'")
            if data.get("streamId", self._started.stream_id) != self._started.stream_id:
                return StreamProblem("wrong_stream", f"{kind!r} for stream {data['streamId']!r}")
            if kind == "media":
                return self._media(_MediaFrame.model_validate(data))
            if kind == "dtmf":
                return KeyPressed(_DtmfFrame.model_validate(data).dtmf.digit)
            if kind == "playedStream":
                return PlayoutMarked(_Played.model_validate(data).name)
        except ValidationError as exc:
            return StreamProblem("bad_frame", f"bad {kind!r} frame: {validation_problems(exc)}")
        return PlaybackCleared()

    def _start(self, start: _Start) -> StreamEvent | StreamProblem:
        if self._started is not None:
            return StreamProblem("out_of_order", "a second 'start'")
        fmt = start.start.mediaFormat
        if fmt.encoding != "audio/x-mulaw" or fmt.sampleRate != 8000:
            return StreamProblem(
                "bad_format",
                f"media format {fmt.encoding}/{fmt.sampleRate}: expected audio/x-mulaw 8000",
            )
        info = start.start
        parameters = extra_headers(start.extra_headers)
        self._started = StreamStarted(
            info.streamId, info.callId, parameters, WireAudio("mulaw", 8000)
        )
        return self._started

    def _media(self, frame: _MediaFrame) -> StreamEvent | StreamProblem:
        if frame.media.track not in ("inbound", "inbound_track"):
            return StreamNoted(f"media of track {frame.media.track!r}")
        try:
            return CallerAudio(base64.b64decode(frame.media.payload, validate=True))
        except (binascii.Error, ValueError):
            return StreamProblem("bad_payload", "media payload is not base64")

    @property
    def stream_id(self) -> str:
        return self._started.stream_id if self._started is not None else ""

    def audio(self, data: bytes) -> str:
        media = {
            "contentType": "audio/x-mulaw",
            "sampleRate": 8000,
            "payload": base64.b64encode(data).decode(),
        }
        return _dump({"event": "playAudio", "media": media})

    def mark(self, name: str) -> str:
        return _dump({"event": "checkpoint", "streamId": self.stream_id, "name": name})

    def clear(self) -> str:
        return _dump({"event": "clearAudio", "streamId": self.stream_id})

    def is_audio(self, frame: str | bytes) -> bool:
        return isinstance(frame, str) and frame.startswith('{"event":"playAudio"')


def _dump(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))
