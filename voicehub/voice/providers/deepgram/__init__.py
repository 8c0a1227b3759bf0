"""Deepgram speech on `deepgram-sdk` (`pip install 'voicehub[deepgram]'`).

- STT: :class:`DeepgramSTT`, the live `/v1/listen` socket (interim/final results,
  endpointing, UtteranceEnd, keyterms, KeepAlive, Finalize, reconnect with replay, fallback).
- TTS: :class:`DeepgramTTS`, Aura over the speak socket when streamed, REST for one-shot.
- :class:`DeepgramEndpoint` (key, base URLs) and :class:`RetryPolicy`, shared by both.

Names load on first access, so importing this package needs neither livekit nor the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voicehub.voice.providers.deepgram.connection import (
        DeepgramAuthError,
        DeepgramEndpoint,
        RetryPolicy,
    )
    from voicehub.voice.providers.deepgram.stt import DeepgramLink, DeepgramSTT
    from voicehub.voice.providers.deepgram.tts import DeepgramTTS

__all__ = [
    "DeepgramAuthError",
    "DeepgramEndpoint",
    "DeepgramLink",
    "DeepgramSTT",
    "DeepgramTTS",
    "RetryPolicy",
]

_HOMES = {
    "DeepgramAuthError": "connection",
    "DeepgramEndpoint": "connection",
    "RetryPolicy": "connection",
    "DeepgramLink": "stt",
    "DeepgramSTT": "stt",
    "DeepgramTTS": "tts",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
