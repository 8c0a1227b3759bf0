"""A Realtime server frame (the bytes of a WebSocket text frame) as an event dict.

The frame is decoded as UTF-8 (a text frame is) and read with `JSONDecoder.raw_decode`,
which is `json.loads` without its per-call steps (sniffing the encoding of bytes, two
whitespace matches): the same value, read from the same text. A frame it does not take
whole (spaces around it, extra data, bad JSON) goes to `json.loads`, whose verdict stands.
Big audio deltas keep their base64 out of the decoder (`realtime.audio_delta`).

A frame that is not a JSON object with a string `type` is logged and dropped (None):
dispatch goes by the `type` string (PROTOCOLS.md section 0).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from voicehub.voice.realtime.audio_delta import FAST_PATH_MIN_BYTES, parse_audio_delta

__all__ = ["parse_server_event"]

log = logging.getLogger("voicehub.voice.realtime")

_decode = json.JSONDecoder().raw_decode


def parse_server_event(raw: bytes) -> dict[str, Any] | None:
    """The event in `raw`, or None (logged) when it is not one."""
    if len(raw) >= FAST_PATH_MIN_BYTES:
        delta = parse_audio_delta(raw)
        if delta is not None:
            return delta
    try:
        text = raw.decode()
        event, end = _decode(text)
        if end != len(text):
            event = json.loads(text)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        try:
            event = json.loads(raw)
        except ValueError:
            log.warning("dropped a server frame that is not JSON: %.80r", raw)
            return None
    if type(event) is not dict or type(event.get("type")) is not str:
        log.warning("dropped a server event without a string type: %.120r", raw)
        return None
    return event
