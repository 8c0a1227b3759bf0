"""A fast path for the hottest server event, `response.output_audio.delta`.

A call receives one of these every few tens of milliseconds for as long as the model
speaks, each a JSON object of simple fields around a long base64 string. Decoding the whole
object (and the SDK's typed event models, which the relay never builds) costs more than the
audio work itself, so the relay reads only the three fields it needs straight from the
frame's bytes: `response_id`, `item_id`, and `delta`, whose base64 stays bytes (the handler
decodes it with `binascii.a2b_base64`, which takes the JSON path's `str` as well).

Only a frame this parser is sure of takes the fast path: the exact GA type, each field once
as a plain string (whitespace after the colon allowed; an escape anywhere in one, or a
repeated or missing key, returns None). Everything else goes through `json.loads`, so
the event seen is the same either way; the tests compare both paths on the same frames.
Unescaped quotes only occur as JSON structure, so `"type":"response.output_audio.delta"`
found in the frame is this event's own type: no other server event nests an object of that
type.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AUDIO_DELTA", "parse_audio_delta"]

AUDIO_DELTA = "response.output_audio.delta"
_TYPE = b'"response.output_audio.delta"'
_FIELDS = (b'"response_id":', b'"item_id":', b'"delta":')
_SPACE = b" \t\r\n"


def parse_audio_delta(raw: bytes) -> dict[str, Any] | None:
    """The audio delta in `raw` as an event dict (`delta` the base64 as bytes), or None
    when `raw` is not a delta this fast path is sure of (parse it as JSON then)."""
    kind = _string_after(raw, b'"type":')
    if kind is None or kind != _TYPE[1:-1]:
        return None
    values: list[bytes] = []
    for key in _FIELDS:
        value = _string_after(raw, key)
        if value is None:
            return None
        values.append(value)
    response_id, item_id, delta = values
    return {
        "type": AUDIO_DELTA,
        "response_id": response_id.decode(),
        "item_id": item_id.decode(),
        "delta": delta,
    }


def _string_after(raw: bytes, key: bytes) -> bytes | None:
    """The plain string value of `key` (which occurs once), else None."""
    at = raw.find(key)
    if at < 0 or raw.find(key, at + 1) >= 0:
        return None
    start = at + len(key)
    while start < len(raw) and raw[start] in _SPACE:
        start += 1
    if raw[start : start + 1] != b'"':
        return None
    end = raw.find(b'"', start + 1)
    if end < 0:
        return None
    value = raw[start + 1 : end]
    return None if b"\\" in value else value
