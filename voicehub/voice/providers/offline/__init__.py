"""The embedded voice stack: no keys, no network, every model inside a pip package.

- TTS: :class:`PiperTTS` (natural) and :class:`ESpeakTTS` (light); :func:`synthesize`.
- STT: :class:`PocketSphinxSTT` (streaming, with partials); :func:`transcribe`;
  :class:`WhisperSTT` (per utterance, robust on phone audio); :class:`MoonshineSTT` (per
  utterance, decoding drafts as the caller speaks; a fifth of Whisper's CPU).
- VAD: :func:`load_vad` (Silero or :class:`WebRtcVAD`).

Names load on first access, so importing this package costs nothing and needs no extra;
using a name without ``pip install 'voicehub[voice]'`` raises MissingExtraError.
:func:`synthesize` and :func:`transcribe` do not import livekit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT
    from voicehub.voice.providers.offline.stt import PocketSphinxSTT
    from voicehub.voice.providers.offline.stt_engine import transcribe
    from voicehub.voice.providers.offline.tts import ESpeakTTS, PiperTTS
    from voicehub.voice.providers.offline.tts_engines import synthesize
    from voicehub.voice.providers.offline.vad import WebRtcVAD, load_vad
    from voicehub.voice.providers.offline.whisper_stt import WhisperSTT

__all__ = [
    "ESpeakTTS",
    "MoonshineSTT",
    "PiperTTS",
    "PocketSphinxSTT",
    "WebRtcVAD",
    "WhisperSTT",
    "load_vad",
    "synthesize",
    "transcribe",
]

_HOMES = {
    "ESpeakTTS": "tts",
    "MoonshineSTT": "moonshine_stt",
    "PiperTTS": "tts",
    "PocketSphinxSTT": "stt",
    "WebRtcVAD": "vad",
    "WhisperSTT": "whisper_stt",
    "load_vad": "vad",
    "synthesize": "tts_engines",
    "transcribe": "stt_engine",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{home}")
    return getattr(module, name)
