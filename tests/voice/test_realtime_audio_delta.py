"""The audio-delta fast path reads the same event as the JSON decoder, or declines."""

from __future__ import annotations

import base64
import json

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


def as_json_reads_it(raw: bytes) -> dict[str, object]:
    """What the relay takes from the JSON decoder's reading of `raw`."""
    event = json.loads(raw)
    fields = {key: event[key] for key in ("type", "response_id", "item_id")}
    return {**fields, "delta": event["delta"].encode()}


def test_a_compact_delta_is_read_without_the_json_decoder() -> None:
    event = parse_audio_delta(compact(DELTA))
    assert event == as_json_reads_it(compact(DELTA))
    assert event is not None
    assert (event["type"], event["response_id"], event["item_id"]) == (
        AUDIO_DELTA,
        "resp_1",
        "item_2",
    )
    assert base64.b64decode(event["delta"], validate=True) == AUDIO


def test_spaces_after_the_colons_are_read_too() -> None:
    raw = json.dumps(DELTA).encode()  # the default layout of json.dumps
    event = parse_audio_delta(raw)
    assert event is not None and event == as_json_reads_it(raw)
    assert base64.b64decode(event["delta"]) == AUDIO


def test_key_order_does_not_matter() -> None:
    shuffled = dict(reversed(list(DELTA.items())))
    event = parse_audio_delta(compact(shuffled))
    assert event is not None and event == as_json_reads_it(compact(shuffled))
    assert base64.b64decode(event["delta"]) == AUDIO


@pytest.mark.parametrize(
    "raw",
    [
        compact({**DELTA, "type": 7}),  # not a string
        compact({**DELTA, "delta": 7}),
        compact({**DELTA, "type": "response.output_audio_transcript.delta"}),
        compact({**DELTA, "type": "response.audio.delta"}),  # the beta name is not ours
        compact({**DELTA, "delta": DELTA["delta"].replace("/", "\\/")}),  # an escape
        compact({**DELTA, "item_id": 'it"em'}),  # an escaped quote in an id
        compact({k: v for k, v in DELTA.items() if k != "response_id"}),
        compact({**DELTA, "extra": {"item_id": "other"}}),  # a key seen twice
        b'{"type":"response.output_audio.delta","response_id":"r","item_id":"i","delta":"AAA',
    ],
)
def test_anything_it_is_not_sure_of_goes_to_the_json_decoder(raw: bytes) -> None:
    assert parse_audio_delta(raw) is None


def test_other_events_are_declined() -> None:
    assert parse_audio_delta(compact({"type": "response.done", "response": {}})) is None
