"""A fast path for the hottest server event, `response.output_audio.delta`, when it is big.

A call receives one of these every few tens of milliseconds for as long as the model
speaks, each a JSON object of simple fields around a long base64 string. The JSON decoder
copies that string into a `str`, at a cost that grows with it; this path cuts the string
out of the frame's bytes first, has the decoder read the few bytes left (every other field
is read exactly as the JSON path reads it), and hands the base64 on as a `memoryview` of
the frame (`binascii.a2b_base64` takes it as it takes the JSON path's `str`): the audio is
never copied before it is decoded.

Cutting the string costs a few Python steps, a fixed cost the decoder's copy exceeds only
on big frames: the connection uses this path from `FAST_PATH_MIN_BYTES` up
(`realtime.server_events`), where the two cost the same; smaller frames go to the decoder.

Only a frame this parser is sure of takes the fast path: one `"delta":` key in the whole
frame, its value a string without escapes, and what is left a JSON object of the exact GA
type. Everything else (None) goes through the JSON path, so the event seen is the same
either way; the tests compare both paths on the same frames. Unescaped quotes only occur
as JSON structure, so the `"delta":` found is a key, and with no second one in the frame,
the key of the top-level object once the decoder finds the placeholder there.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["AUDIO_DELTA", "FAST_PATH_MIN_BYTES", "parse_audio_delta"]

AUDIO_DELTA = "response.output_audio.delta"
FAST_PATH_MIN_BYTES = 3072  # about 45 ms of model audio: below, the decoder is faster
_DELTA_KEY = b'"delta":'
_PLACEHOLDER = "\x00"  # no base64 string is this one character
_PLACEHOLDER_JSON = b'"\\u0000"'
_SPACE = (b" ", b"\t", b"\r", b"\n")
_decode = json.JSONDecoder().raw_decode  # json.loads's reading of text, without its sniffing


def parse_audio_delta(raw: bytes) -> dict[str, Any] | None:
    """The audio delta in `raw` as `json.loads` reads it, but `delta` a memoryview of the
    base64 in `raw`; None when `raw` is not a delta this path is sure of (parse it as JSON
    then)."""
    key = raw.find(_DELTA_KEY)
    if key < 0:
        return None
    start = key + len(_DELTA_KEY)
    while raw[start : start + 1] in _SPACE:
        start += 1
    if raw[start : start + 1] != b'"':
        return None
    end = raw.find(b'"', start + 1)
    if end < 0 or raw.find(b"\\", start, end) >= 0:
        return None
    rest = raw[:start] + _PLACEHOLDER_JSON + raw[end + 1 :]
    if rest.find(_DELTA_KEY, key + 1) >= 0:  # a second one: which is the event's own?
        return None
    try:
        text = rest.decode()
        event, end_of_json = _decode(text)
    except ValueError:  # not UTF-8, not JSON, or spaces before it: the JSON path decides
        return None
    if end_of_json != len(text):
        return None
    if (
        type(event) is not dict
        or event.get("type") != AUDIO_DELTA
        or event.get("delta") != _PLACEHOLDER
    ):
        return None
    event["delta"] = memoryview(raw)[start + 1 : end]
    return event
