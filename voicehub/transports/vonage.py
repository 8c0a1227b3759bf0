"""Vonage Voice API WebSocket connections as a sans-I/O codec.

Vonage (a WebSocket *client*, from an NCCO `connect` to a `websocket` endpoint) carries
audio as **binary** frames both ways: PCM16 little-endian mono at the rate the NCCO's
`content-type` named (`audio/l16;rate=16000` in ours: 640 bytes per 20 ms). Events are JSON
text frames: first `websocket:connected` (the content type, and the endpoint's `headers`:
ours carry the call's uuid), then `websocket:dtmf`, `websocket:notify` (the payload of a
`notify` we sent, once the audio queued before it has played: the mark) and
`websocket:cleared` (the buffer was flushed, as we asked). We send binary audio of exactly
one frame (the last one padded with silence), `{"action": "notify"}` and
`{"action": "clear"}`. Vonage sends no stop: it closes the socket when the call ends.
Vonage buffers a bounded amount of audio, so ours is paced (`PLAYOUT_LEAD`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from voicehub.transports.phone import (
    CallerAudio,
    KeyPressed,
    PlaybackCleared,
    PlayoutMarked,
    StreamEvent,
    StreamNoted,
    StreamProblem,
    StreamStarted,
)
from voicehub.voice.transport import WireAudio

__all__ = ["BUFFER_MESSAGES", "CONTENT_TYPE", "PLAYOUT_LEAD", "VonageCodec"]

CONTENT_TYPE = "audio/l16;rate=16000"
BUFFER_MESSAGES = 3072  # what Vonage's socket buffers of audio sent ahead of playback
PLAYOUT_LEAD = 20.0  # seconds of agent audio we let Vonage hold
MAX_FRAME_CHARS = 16_000
_RATE = re.compile(r"audio/l16;\s*rate=(8000|16000)$")
_DIGIT = re.compile(r"[0-9*#A-Da-d]")


class VonageCodec:
    """Vonage WebSocket connections as a `voicehub.transports.phone.PhoneCodec`."""

    carrier = "vonage"
    marks_survive_clear = False  # a notify whose audio was cleared is not echoed
    # Vonage buffers 3072 messages (about a minute) and loses what comes past that: a third of
    # it may be queued there, the rest is paced at 20 ms a frame as it plays.
    playout_lead: float | None = PLAYOUT_LEAD

    def __init__(self, stream_id: str = "") -> None:
        self.stream_id = stream_id  # Vonage names no stream: the server gives one
        self._started: StreamStarted | None = None
        self._frame = 640
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
        if isinstance(frame, bytes):
            if self._started is None:
                return StreamProblem("out_of_order", "audio before 'websocket:connected'")
            if len(frame) % 2:
                return StreamProblem("bad_audio", f"audio frame of {len(frame)} bytes (odd)")
            return CallerAudio(frame)
        if len(frame) > MAX_FRAME_CHARS:
            return StreamProblem("frame_too_big", f"text frame of {len(frame)} characters")
        try:
            data = json.loads(frame)
        except ValueError:
            return StreamProblem("bad_json", f"frame is not JSON: {frame[:40]!r}")
        kind = data.get("event") if isinstance(data, dict) else None
        if kind == "websocket:connected":
            return self._connected(data)
        if self._started is None:
            return StreamProblem("out_of_order", f"{kind!r} before 'websocket:connected'")
        if kind == "websocket:dtmf":
            found = data.get("digit", (data.get("dtmf") or {}).get("digit"))
            if not isinstance(found, str) or not _DIGIT.fullmatch(found):
                return StreamProblem("bad_frame", f"bad 'websocket:dtmf' frame: digit {found!r}")
            return KeyPressed(found)
        if kind == "websocket:notify":
            name = (data.get("payload") or {}).get("name")
            if not isinstance(name, str) or not name:
                return StreamProblem("bad_frame", "a 'websocket:notify' without payload.name")
            return PlayoutMarked(name)
        if kind == "websocket:cleared":
            return PlaybackCleared()
        if isinstance(kind, str) and kind.startswith("websocket:"):
            return StreamNoted(kind)
        return StreamProblem("unknown_event", f"unknown frame (event {kind!r})")

    def _connected(self, data: dict[str, Any]) -> StreamEvent | StreamProblem:
        if self._started is not None:
            return StreamProblem("out_of_order", "a second 'websocket:connected'")
        content = str(data.get("content-type", "")).replace(" ", "")
        found = _RATE.fullmatch(content)
        if found is None:
            return StreamProblem(
                "bad_format", f"content-type {content!r}: expected audio/l16;rate=8000 or 16000"
            )
        rate = int(found.group(1))
        self._frame = rate // 50 * 2
        # The endpoint's headers: at the top level of the frame, or under "headers".
        nested = data.get("headers")
        headers: dict[str, Any] = nested if isinstance(nested, dict) else data
        parameters = {k: v for k, v in headers.items() if isinstance(v, str) and k != "event"}
        call_id = parameters.get("call_uuid", "")
        self._started = StreamStarted(
            self.stream_id or call_id, call_id, parameters, WireAudio("pcm16", rate)
        )
        return self._started

    def audio(self, data: bytes) -> bytes:
        return data + bytes(self._frame - len(data)) if len(data) < self._frame else data

    def mark(self, name: str) -> str:
        return _dump({"action": "notify", "payload": {"name": name}})

    def clear(self) -> str:
        return _dump({"action": "clear"})

    def is_audio(self, frame: str | bytes) -> bool:
        return isinstance(frame, bytes)


def _dump(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))
