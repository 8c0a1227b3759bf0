"""A server frame is read as `json.loads` reads it, or dropped when it is not an event."""

from __future__ import annotations

import base64
import json

import pytest

from voicehub.voice.realtime.audio_delta import FAST_PATH_MIN_BYTES
from voicehub.voice.realtime.server_events import parse_server_event

SMALL_DELTA = {
    "type": "response.output_audio.delta",
    "event_id": "event_7",
    "response_id": "resp_1",
    "item_id": "item_2",
    "output_index": 0,
    "content_index": 0,
    "delta": base64.b64encode(bytes(range(256)) * 3).decode(),
}


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(SMALL_DELTA, separators=(",", ":")).encode(),
        json.dumps(SMALL_DELTA).encode(),
        json.dumps(
            {"type": "response.done", "response": {"id": "r\u00e9sp", "x": [1, 2.5]}}
        ).encode(),
        '{"type":"error","error":{"message":"caf\u00e9 \\"quoted\\""}}'.encode(),
        b'  {"type":"session.updated","session":{}}\n',  # spaces around: json.loads's reading
    ],
)
def test_a_frame_is_read_as_json_loads_reads_it(raw: bytes) -> None:
    assert len(raw) < FAST_PATH_MIN_BYTES  # the decoder's path, not the big-delta one
    assert parse_server_event(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b'{"type":"x"} {"type":"y"}',  # extra data
        b'{"type":"x"',
        b"\xff\xfe",
        b'["type"]',
        b'{"type":7}',
        b'{"event":"media"}',
    ],
)
def test_a_frame_that_is_not_an_event_is_dropped(raw: bytes) -> None:
    assert parse_server_event(raw) is None


def test_a_big_delta_keeps_its_base64_as_a_view_of_the_frame() -> None:
    delta = {**SMALL_DELTA, "delta": base64.b64encode(bytes(FAST_PATH_MIN_BYTES)).decode()}
    raw = json.dumps(delta).encode()
    event = parse_server_event(raw)
    assert event is not None and isinstance(event["delta"], memoryview)
    assert {**event, "delta": bytes(event["delta"]).decode()} == json.loads(raw)
