"""The fake Twilio of the tests: the webhook signer and the Media Streams client.

The protocol code lives in `voicehub.client.twilio` (the CLI's `voicehub call --twilio`
speaks it too); the tests know its caller as `FakeTwilio`. The fake REST API for call-backs
is `voicehub_dev.fakes.twilio_rest`.
"""

from __future__ import annotations

from voicehub.client.twilio import (
    FRAME,
    FRAME_SECONDS,
    SILENCE,
    PhoneLineClient,
    StreamAnswer,
    parse_twiml,
    sign,
)
from voicehub.client.twilio import TwilioCaller as FakeTwilio

__all__ = [
    "FRAME",
    "FRAME_SECONDS",
    "SILENCE",
    "FakeTwilio",
    "PhoneLineClient",
    "StreamAnswer",
    "parse_twiml",
    "sign",
]
