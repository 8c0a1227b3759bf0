"""A livekit STT that recognizes whole utterances (no streaming) as fixed words, for engine
tests whose subject is not the recognizer: the engine wraps it in its `UtteranceStream`."""

from __future__ import annotations

import asyncio
from typing import Any

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.language import LanguageCode


class UtteranceRecognizer:
    """Hears `words` in every utterance. `held`: each decoding waits for `release` (a
    recognizer far behind on a loaded machine); `decodings` counts those begun."""

    capabilities = stt.STTCapabilities(streaming=False, interim_results=False)

    def __init__(self, words: str, *, held: bool = False) -> None:
        self.words = words
        self.release = asyncio.Event()
        if not held:
            self.release.set()
        self.decodings = 0

    async def recognize(self, frames: list[rtc.AudioFrame]) -> stt.SpeechEvent:
        self.decodings += 1
        await self.release.wait()
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language=LanguageCode("en"), text=self.words)],
        )

    def on(self, event: str, handler: Any) -> None:  # no metrics from this one
        pass

    def off(self, event: str, handler: Any) -> None:
        pass
