"""livekit-agents STT plugin for Whisper (tiny.en, offline): :class:`WhisperSTT`.

Not streaming: AgentSession wraps it in a ``StreamAdapter`` that hands it each utterance the
session's VAD cut out, so a turn's transcript arrives once, after the caller stops (no
partials; barge-in still comes from the VAD).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Never

import numpy as np

from voicehub.voice.audio import int16_to_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
from voicehub.voice.providers.offline.whisper_engine import (
    WhisperRecognizer,
    shared_recognizer,
    vocabulary_prompt,
)
from voicehub.voice.providers.offline.whisper_relisten import Relisten

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt, utils
    from livekit.agents.language import LanguageCode
    from livekit.agents.types import NOT_GIVEN, APIConnectOptions, NotGivenOr

__all__ = ["WhisperSTT"]

_LANGUAGE = LanguageCode("en-US")  # tiny.en is English only


class WhisperSTT(stt.STT[Never]):
    """Offline STT on Whisper tiny.en, biased toward `vocabulary` (a desk's topics and
    trigger phrases); with `relisten`, audio that asks the desk for nothing is heard
    a second time, slowed (`whisper_relisten`); with `correction`, spans of what it hears
    that sound like one of the desk's topics are replaced by it (`vocabulary_correction`).
    The model is shared by every call unless
    `recognizer` is given."""

    def __init__(
        self,
        *,
        vocabulary: Iterable[str] = (),
        relisten: Relisten | None = None,
        correction: VocabularyCorrection | None = None,
        recognizer: WhisperRecognizer | None = None,
    ) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))
        self._recognizer = recognizer or shared_recognizer()
        self._prompt = vocabulary_prompt(vocabulary)
        self._relisten = relisten
        self._correction = correction

    @property
    def model(self) -> str:
        """The bundled model."""
        return "whisper-tiny.en"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    @property
    def prompt(self) -> str:
        """The vocabulary prompt every utterance is decoded with."""
        return self._prompt

    @property
    def relisten(self) -> Relisten | None:
        """When audio is listened to a second time, if ever."""
        return self._relisten

    @property
    def correction(self) -> VocabularyCorrection | None:
        """How transcripts are corrected to the desk's topics, if they are."""
        return self._correction

    def prewarm(self) -> None:
        """Load and check the model now (blocking, about half a second)."""
        self._recognizer.prewarm()

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer) if isinstance(buffer, list) else buffer
        pcm16 = _mono_pcm16(frame)
        heard = await asyncio.to_thread(
            self._recognizer.recognize,
            pcm16,
            frame.sample_rate,
            prompt=self._prompt,
            relisten=self._relisten,
            correction=self._correction,
        )
        data = stt.SpeechData(
            language=_LANGUAGE,
            text=heard.text,
            confidence=heard.confidence,
            start_time=heard.start_time,
            end_time=heard.end_time,
        )
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            request_id=uuid.uuid4().hex,
            alternatives=[data],
        )


def _mono_pcm16(frame: rtc.AudioFrame) -> bytes:
    samples = np.frombuffer(frame.data, dtype=np.int16)
    if frame.num_channels > 1:
        mixed = samples.reshape(-1, frame.num_channels).astype(np.float32).mean(axis=1)
        return int16_to_pcm16(np.rint(mixed))
    return samples.tobytes()
