"""livekit-agents STT plugin for PocketSphinx: :class:`PocketSphinxSTT`.

The stream emits INTERIM_TRANSCRIPT whenever the hypothesis changes, START_OF_SPEECH with
the first words, and FINAL_TRANSCRIPT then END_OF_SPEECH when the utterance ends: on
``flush()`` (the session flushes on VAD end of speech because ``manual_flush`` is set) or
after ``endpoint_silence`` seconds of silence (for ``turn_detection="stt"``).

Decoding runs in worker processes (`sphinx_workers`): PocketSphinx holds the GIL while it
decodes, so on the server's event loop, or a thread of its process, it would hold up every
call. The stream only forwards frames (where they are pushed, `InlineRecognizeStream`) and
turns the worker's partials and finals into livekit events.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, Never

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.inline_stt import (
    InlineRecognizeStream,
    InputItem,
    mono_pcm16,
)
from voicehub.voice.providers.offline.sphinx_wire import Flushed, Heard, StreamFailed
from voicehub.voice.providers.offline.sphinx_workers import (
    SphinxWorkers,
    StreamLink,
    WorkerGone,
    shared_workers,
)
from voicehub.voice.providers.offline.stt_engine import (
    Final,
    Partial,
    RecognizerEvent,
    Transcript,
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


class PocketSphinxSTT(stt.STT[Never]):  # Never: no events beyond livekit's own
    """Offline streaming STT on PocketSphinx's bundled en-us model.

    Streams decode in worker processes (the process-wide ones unless `workers` is given),
    on decoders lent per utterance; a worker builds one on demand (about a second, during
    which that worker's other streams wait), so call :meth:`prewarm` at startup.
    """

    def __init__(
        self,
        *,
        workers: SphinxWorkers | None = None,
        gate: bool = True,
        endpoint_silence: float | None = 1.0,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        self._workers = workers or shared_workers()
        self.gate = gate
        self.endpoint_silence = endpoint_silence

    @property
    def model(self) -> str:
        """The bundled acoustic model."""
        return "pocketsphinx-en-us"

    @property
    def provider(self) -> str:
        """Always ``"offline"``."""
        return "offline"

    @property
    def workers(self) -> SphinxWorkers:
        """Where streams decode."""
        return self._workers

    def prewarm(self, decoders: int = 1) -> None:
        """Start the worker processes and build `decoders` decoders in them (blocking,
        about a second each)."""
        self._workers.prewarm(decoders)

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        frame = rtc.combine_audio_frames(buffer) if isinstance(buffer, list) else buffer
        transcript = await self._workers.recognize(mono_pcm16(frame), frame.sample_rate)
        return _speech_event(stt.SpeechEventType.FINAL_TRANSCRIPT, uuid.uuid4().hex, transcript)

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> PocketSphinxStream:
        """Open a streaming recognition; push frames at any rate (resampled to 16 kHz)."""
        return PocketSphinxStream(stt=self, conn_options=conn_options)


class PocketSphinxStream(InlineRecognizeStream):
    """One caller's stream: frames go to its worker process where they are pushed; the
    worker's partials and finals come back on the event loop as livekit events. Each flush
    is answered by one final (maybe empty), in order."""

    def __init__(self, *, stt: PocketSphinxSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._request_id = uuid.uuid4().hex[:12]
        self._speaking = False
        self._unreported_audio = 0.0
        self._flushes_out = 0  # flushes the worker has not answered yet
        self._answered: asyncio.Future[None] | None = None
        self._link: StreamLink = stt.workers.open(
            self._on_reply, gate=stt.gate, endpoint_silence=stt.endpoint_silence
        )

    @property
    def finals_owed(self) -> int:
        """Flushes whose final has not come back yet (the engine waits for them)."""
        return self._flushes_out

    @property
    def worker_pid(self) -> int:
        """The process decoding this stream."""
        return self._link.pid

    def _take(self, item: InputItem) -> bool:
        if isinstance(item, self._FlushSentinel):
            self._flushes_out += 1
            self._link.flush()
        else:
            self._unreported_audio += item.duration
            self._link.audio(mono_pcm16(item), item.sample_rate)
        return True

    def _on_reply(self, reply: Any) -> None:
        """A reply from the worker, on the event loop."""
        if isinstance(reply, Heard):
            for event in reply.events:
                self._emit_recognized(event)
        elif isinstance(reply, Flushed):
            self._emit_recognized(Final(reply.transcript))
            self._flushes_out -= 1
            answered = self._answered
            if self._flushes_out == 0 and answered is not None and not answered.done():
                answered.set_result(None)
        elif isinstance(reply, StreamFailed | WorkerGone):
            problem = reply.error if isinstance(reply, StreamFailed) else reply.message
            self._fail(RuntimeError(f"PocketSphinx recognition failed: {problem}"))
            if self._answered is not None and not self._answered.done():
                self._answered.set_result(None)

    async def _run(self) -> None:
        try:
            await super()._run()
            if self._flushes_out > 0:  # input ended: the last finals still come
                self._answered = asyncio.get_running_loop().create_future()
                await self._answered
                if self._error is not None:
                    raise self._error
        finally:
            self._link.close()

    async def aclose(self) -> None:
        """Close now; the worker forgets the stream."""
        self._link.close()
        await super().aclose()

    def _emit_recognized(self, event: RecognizerEvent) -> None:
        send = self._emit
        if isinstance(event, Partial):
            if not self._speaking:
                self._speaking = True
                send(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))
            send(_speech_event(stt.SpeechEventType.INTERIM_TRANSCRIPT, self._request_id, event))
            return
        # Always send the final, even empty: after a flush the session waits for one.
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
