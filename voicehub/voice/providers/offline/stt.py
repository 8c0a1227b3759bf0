"""livekit-agents STT plugin for PocketSphinx: :class:`PocketSphinxSTT`.

The stream emits INTERIM_TRANSCRIPT whenever the hypothesis changes, START_OF_SPEECH with
the first words, and FINAL_TRANSCRIPT then END_OF_SPEECH when the utterance ends: on
``flush()`` (AgentSession flushes on VAD end of speech because ``manual_flush`` is set) or
after ``endpoint_silence`` seconds of silence (for ``turn_detection="stt"``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Never

import numpy as np

from voicehub.voice.audio import int16_to_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decoder_pool import DecoderPoolExhausted
from voicehub.voice.providers.offline.inline_stt import InlineRecognizeStream, InputItem
from voicehub.voice.providers.offline.stt_engine import (
    SAMPLE_RATE,
    DecoderPool,
    Final,
    Partial,
    RecognizerEvent,
    SphinxRecognizer,
    Transcript,
    recognize_pcm,
    shared_pool,
    transcribe,
)

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt, utils
    from livekit.agents.language import LanguageCode
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )

__all__ = ["PocketSphinxSTT", "PocketSphinxStream", "transcribe"]

_LANGUAGE = LanguageCode("en-US")  # the only model the wheel ships
_YIELD_EVERY = 10  # queued input items (20 ms frames) between yields to the event loop
_LEND = object()  # queued after a frame that left audio waiting for a decoder


class PocketSphinxSTT(stt.STT[Never]):  # Never: no events beyond livekit's own
    """Offline streaming STT on PocketSphinx's bundled en-us model.

    Decoders come from a bounded pool (the process-wide one unless ``pool`` is given), one
    per utterance being decoded; the pool builds one on demand (about a second, stalling
    the event loop), so call :meth:`prewarm` at startup.
    """

    def __init__(
        self,
        *,
        pool: DecoderPool | None = None,
        gate: bool = True,
        endpoint_silence: float | None = 1.0,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        self._pool = pool or shared_pool()
        self._recognizer_options: dict[str, Any] = {
            "gate": gate,
            "endpoint_silence": endpoint_silence,
        }

    @property
    def model(self) -> str:
        """The bundled acoustic model."""
        return "pocketsphinx-en-us"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    @property
    def pool(self) -> DecoderPool:
        """Where streams get their decoders."""
        return self._pool

    def prewarm(self, decoders: int = 1) -> None:
        """Load decoders into the pool now (blocking, about one second each).

        Do it at startup: a stream that finds the pool empty builds a decoder, and that
        stalls the event loop (PocketSphinx holds the GIL while loading).
        """
        self._pool.prewarm(decoders)

    def new_recognizer(self, decoder: Any = None) -> SphinxRecognizer:
        """A recognizer with this plugin's options, over ``decoder`` or (None) decoders
        lent by the stream per utterance."""
        return SphinxRecognizer(decoder, **self._recognizer_options)

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer) if isinstance(buffer, list) else buffer
        pcm16 = _mono_pcm16(frame)
        transcript = await asyncio.to_thread(self._recognize_blocking, pcm16, frame.sample_rate)
        return _speech_event(stt.SpeechEventType.FINAL_TRANSCRIPT, uuid.uuid4().hex, transcript)

    def _recognize_blocking(self, pcm16: bytes, sample_rate: int) -> Transcript:
        decoder = self._pool.acquire()
        try:
            return recognize_pcm(decoder, pcm16, sample_rate)
        finally:
            self._pool.release(decoder)

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> PocketSphinxStream:
        """Open a streaming recognition; push frames at any rate (resampled to 16 kHz)."""
        return PocketSphinxStream(stt=self, conn_options=conn_options)


class PocketSphinxStream(InlineRecognizeStream):
    """One caller's stream; decodes inline since PocketSphinx holds the GIL anyway: each
    frame is fed where it is pushed (`InlineRecognizeStream`), with no task woken for it.

    It holds a decoder from the pool only while an utterance is decoded: from the first
    speech the gate lets through until the utterance's final is out. While every decoder
    is busy the utterance waits (the caller's audio stays queued in the stream, and the
    stream's task awaits the decoder) for up to the pool's ``wait_timeout``; if none comes,
    the utterance is dropped with an error log.
    """

    def __init__(self, *, stt: PocketSphinxSTT, conn_options: APIConnectOptions) -> None:
        # sample_rate makes the base class resample pushed frames (livekit's soxr resampler).
        super().__init__(stt=stt, conn_options=conn_options, sample_rate=SAMPLE_RATE)
        self._sphinx = stt
        self._request_id = uuid.uuid4().hex[:12]
        self._speaking = False
        self._unreported_audio = 0.0
        self._recognizer = stt.new_recognizer(None)
        self._items = 0  # queued items taken by the task (it yields every few)

    def _take(self, item: InputItem) -> bool:
        recognizer = self._recognizer
        if isinstance(item, self._FlushSentinel) and recognizer.wants_decoder:
            return False  # the task lends one first
        self._handle(item)
        if recognizer.wants_decoder:
            self._queue(_LEND)  # the task lends one; the next items wait behind it
        self._release_if_done()
        return True

    async def _take_queued(self, item: object) -> None:
        self._items += 1
        if self._items % _YIELD_EVERY == 0:
            # Queued input (a backlog after waiting for a decoder) is read without
            # suspending: let other calls' frames through between batches.
            await asyncio.sleep(0)
        recognizer, pool = self._recognizer, self._sphinx.pool
        if item is _LEND:
            await self._lend_decoder(recognizer, pool)
        elif isinstance(item, (rtc.AudioFrame, self._FlushSentinel)):
            if isinstance(item, self._FlushSentinel):
                await self._lend_decoder(recognizer, pool)
            self._handle(item)
            await self._lend_decoder(recognizer, pool)
        self._release_if_done()

    def _handle(self, item: InputItem) -> None:
        recognizer = self._recognizer
        if isinstance(item, self._FlushSentinel):
            self._emit(Final(recognizer.finish()))
            return
        self._unreported_audio += item.duration
        for event in recognizer.feed(_mono_pcm16(item), item.sample_rate):
            self._emit(event)

    def _release_if_done(self) -> None:
        if self._recognizer.can_detach:
            self._sphinx.pool.release(self._recognizer.detach())

    async def _run(self) -> None:
        try:
            await super()._run()
        finally:
            recognizer = self._recognizer
            recognizer.close()
            if recognizer.decoder is not None:
                self._sphinx.pool.release(recognizer.detach())

    async def _lend_decoder(self, recognizer: SphinxRecognizer, pool: DecoderPool) -> None:
        """Attach a decoder when audio waits for one (queued input waits meanwhile)."""
        if not recognizer.wants_decoder:
            return
        try:
            decoder = await pool.acquire_async()
        except DecoderPoolExhausted:
            recognizer.drop_waiting()  # the pool logged it; the next utterance tries again
            return
        for event in recognizer.attach(decoder):
            self._emit(event)

    def _emit(self, event: RecognizerEvent) -> None:
        send = self._event_ch.send_nowait
        if isinstance(event, Partial):
            if not self._speaking:
                self._speaking = True
                send(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))
            send(_speech_event(stt.SpeechEventType.INTERIM_TRANSCRIPT, self._request_id, event))
            return
        # Always send the final, even empty: after a flush AgentSession waits for one.
        offset = self.start_time_offset  # times must count from the session's audio start
        transcript = event.transcript
        shifted = Transcript(
            transcript.text,
            transcript.confidence,
            transcript.start_time + offset,
            transcript.end_time + offset,
        )
        send(_speech_event(stt.SpeechEventType.FINAL_TRANSCRIPT, self._request_id, shifted))
        if self._speaking:
            self._speaking = False
            send(stt.SpeechEvent(type=stt.SpeechEventType.END_OF_SPEECH))
        if self._unreported_audio > 0:
            usage = stt.RecognitionUsage(audio_duration=self._unreported_audio)
            self._unreported_audio = 0.0
            send(
                stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    request_id=self._request_id,
                    recognition_usage=usage,
                )
            )


def _speech_event(
    kind: stt.SpeechEventType, request_id: str, result: Transcript | Partial
) -> stt.SpeechEvent:
    if isinstance(result, Partial):
        data = stt.SpeechData(language=_LANGUAGE, text=result.text)
    else:
        data = stt.SpeechData(
            language=_LANGUAGE,
            text=result.text,
            confidence=result.confidence,
            start_time=result.start_time,
            end_time=result.end_time,
        )
    return stt.SpeechEvent(type=kind, request_id=request_id, alternatives=[data])


def _mono_pcm16(frame: rtc.AudioFrame) -> bytes:
    samples = np.frombuffer(frame.data, dtype=np.int16)
    if frame.num_channels > 1:
        mixed = samples.reshape(-1, frame.num_channels).astype(np.float32).mean(axis=1)
        return int16_to_pcm16(np.rint(mixed))
    return samples.tobytes()
