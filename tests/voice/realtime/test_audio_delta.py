"""The audio-delta fast path reads the same event as the JSON decoder, or declines."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from voicehub.voice.realtime.audio_delta import AUDIO_DELTA, parse_audio_delta

AUDIO = bytes(range(256)) * 4  # base64 with '+' and '/' in it
DELTA = {
    "type": AUDIO_DELTA,
    "event_id": "event_7",
    "response_id": "resp_1",
    "item_id": "item_2",
    "output_index": 0,
    "content_index": 0,
    "delta": base64.b64encode(AUDIO).decode(),
}


def compact(event: dict[str, object]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def read_both_ways(raw: bytes) -> dict[str, Any]:
    """The fast path's event, checked against the JSON decoder's reading of `raw`."""
    event = parse_audio_delta(raw)
    assert event is not None
    assert isinstance(event["delta"], memoryview)  # the frame's bytes, not a copy
    assert event["delta"].obj is raw
    as_json = json.loads(raw)
    assert {**event, "delta": bytes(event["delta"]).decode()} == as_json
    return event


def test_a_compact_delta_is_read_as_the_json_decoder_reads_it() -> None:
    event = read_both_ways(compact(DELTA))
    assert (event["type"], event["response_id"], event["item_id"]) == (
        AUDIO_DELTA,
        "resp_1",
        "item_2",
    )
    assert base64.b64decode(event["delta"], validate=True) == AUDIO


def test_spaces_after_the_colons_are_read_too() -> None:
    event = read_both_ways(json.dumps(DELTA).encode())  # the default layout of json.dumps
    assert base64.b64decode(event["delta"]) == AUDIO


def test_key_order_does_not_matter() -> None:
    event = read_both_ways(compact(dict(reversed(list(DELTA.items())))))
    assert base64.b64decode(event["delta"]) == AUDIO


def test_other_fields_are_read_by_the_json_decoder_escapes_included() -> None:
    event = read_both_ways(compact({**DELTA, "item_id": 'it"em', "extra": {"item_id": "x"}}))
    assert event["item_id"] == 'it"em'


@pytest.mark.parametrize(
    "raw",
    [
        compact({**DELTA, "type": 7}),  # not a string
        compact({**DELTA, "delta": 7}),
        compact({**DELTA, "type": "response.output_audio_transcript.delta"}),
        compact({**DELTA, "type": "response.audio.delta"}),  # the beta name is not ours
        compact({**DELTA, "delta": DELTA["delta"].replace("/", "\\/")}),  # an escape
        compact({"nested": {"delta": "AAAA"}, **DELTA}),  # a second delta key
        compact({"type": AUDIO_DELTA, "nested": {"delta": "AAAA"}}),  # only a nested one
        compact({**DELTA, "delta": "\x00"}).replace(b"\\u0000", b"AAAA")[:-1],  # cut short
        b'{"type":"response.output_audio.delta","response_id":"r","item_id":"i","delta":"AAA',
        b'["response.output_audio.delta",{"delta":"AAAA"}]',  # not an object
        b" " + compact(DELTA),  # spaces before the object
        compact(DELTA) + b' {"type":"x"}',  # extra data after it
    ],
)
def test_anything_it_is_not_sure_of_goes_to_the_json_decoder(raw: bytes) -> None:
    assert parse_audio_delta(raw) is None


def test_other_events_are_declined() -> None:
    assert parse_audio_delta(compact({"type": "response.done", "response": {}})) is None
