"""livekit-agents TTS plugins for the offline engines: :class:`PiperTTS` and :class:`ESpeakTTS`.

Both are non-streaming (``ChunkedStream``); AgentSession wraps them in its sentence
tokenizer, so each reply sentence is synthesized as soon as the LLM has written it. The
engine runs in a worker thread so the event loop keeps moving frames for other calls.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Never

from voicehub.voice.audio import Resampler, int16_to_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.tts_engines import (
    SpeechEngine,
    TTSVoice,
    load_engine,
    synthesize,
)

with vendor_import("livekit-agents"):
    from livekit.agents import tts
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

__all__ = ["ESpeakTTS", "OfflineTTS", "PiperTTS", "synthesize"]

_NATIVE_RATE = 22050  # both engines; other rates are resampled


class OfflineTTS(tts.TTS[Never]):  # Never: no events beyond livekit's own
    """A TTS plugin over a shared offline engine; the engine loads lazily, once per process."""

    def __init__(self, voice: TTSVoice, *, sample_rate: int = _NATIVE_RATE) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self._voice: TTSVoice = voice

    @property
    def model(self) -> str:
        """Engine name, for livekit metrics."""
        return self._voice

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    def prewarm(self) -> None:
        """Load the engine now (blocking) instead of on the first reply."""
        load_engine(self._voice)

    async def engine(self) -> SpeechEngine:
        """The shared engine, loaded in a worker thread on first use."""
        return await asyncio.to_thread(load_engine, self._voice)

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        """Synthesize ``text``; iterate the stream for audio frames."""
        return _OfflineChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class PiperTTS(OfflineTTS):
    """Piper with the pinned joe voice: natural, deterministic, RTF about 0.05 on one core."""

    def __init__(self, *, sample_rate: int = _NATIVE_RATE) -> None:
        super().__init__("piper", sample_rate=sample_rate)


class ESpeakTTS(OfflineTTS):
    """eSpeak NG: robotic but nearly free (RTF about 0.001); no model to load."""

    def __init__(self, *, sample_rate: int = _NATIVE_RATE) -> None:
        super().__init__("espeak", sample_rate=sample_rate)


class _OfflineChunkedStream(tts.ChunkedStream):
    def __init__(
        self, *, tts: OfflineTTS, input_text: str, conn_options: APIConnectOptions
    ) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._offline_tts = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        out_rate = self._offline_tts.sample_rate
        output_emitter.initialize(
            request_id=uuid.uuid4().hex[:12],
            sample_rate=out_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        if not self.input_text.strip():
            return
        engine = await self._offline_tts.engine()
        resampler = Resampler(engine.sample_rate, out_rate)
        pieces = engine.pieces(self.input_text)
        pushed = False
        # One thread hop per piece: the first plays while the next renders.
        while (samples := await asyncio.to_thread(next, pieces, None)) is not None:
            output_emitter.push(int16_to_pcm16(resampler.push(samples)))
            pushed = True
        output_emitter.push(int16_to_pcm16(resampler.flush()))
        if not pushed:
            # Text with nothing to say ("...") must not fail the reply: livekit treats a
            # stream without audio as an API error and retries it.
            output_emitter.push(bytes(2 * out_rate // 50))
