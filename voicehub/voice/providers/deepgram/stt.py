"""livekit-agents STT plugin on Deepgram's live `/v1/listen` socket: :class:`DeepgramSTT`.

Speech events follow Deepgram's results: interim `Results` -> INTERIM_TRANSCRIPT, `is_final`
-> FINAL_TRANSCRIPT, `speech_final` (endpointing), `from_finalize` or `UtteranceEnd` ->
END_OF_SPEECH. AgentSession flushes at the end of each turn (``manual_flush``), which sends
`Finalize`. With no audio for `keepalive_interval` seconds (the caller's side is quiet while
the agent talks, on some transports) it sends `KeepAlive`, as Deepgram closes idle sockets
after 10 s. A dropped socket, 429 or 5xx reconnects with backoff and replays the audio not
yet covered by a final result (`stt_audio.AudioLedger`); each fault is reported as a
recoverable livekit `error` event. When Deepgram stays down, a `fallback` STT (PocketSphinx)
takes over the stream with the audio owed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal, Never

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.jobs import cancel_and_wait
from voicehub.voice.audio import lin2ulaw, ulaw2lin
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.deepgram.connection import (
    DeepgramEndpoint,
    RetryPolicy,
    Sleep,
    auth_error,
    fault_status,
    is_retryable,
)
from voicehub.voice.providers.deepgram.stt_audio import AudioLedger, Chunk

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import APIConnectionError, APIStatusError, stt, utils
    from livekit.agents.language import LanguageCode
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )

__all__ = ["DeepgramSTT", "DeepgramSTTStream"]

log = logging.getLogger("voicehub.voice.deepgram")

Encoding = Literal["linear16", "mulaw"]


class DeepgramSTT(stt.STT[Never]):  # Never: no events beyond livekit's own
    """Streaming Deepgram recognition (Nova) behind livekit's `stt.STT`.

    `encoding="mulaw"` with `sample_rate=8000` sends phone audio as G.711 without
    resampling. `keyterms` prompt the recognizer with the desk's vocabulary (`keyterm` on
    nova-3, `keywords` on older models). `clock` times KeepAlive, `sleep` the backoff.
    """

    def __init__(
        self,
        *,
        endpoint: DeepgramEndpoint | None = None,
        model: str = "nova-3",
        language: str = "en-US",
        sample_rate: int = 16000,
        encoding: Encoding = "linear16",
        endpointing_ms: int | None = 300,
        utterance_end_ms: int | None = 1000,
        keyterms: Sequence[str] = (),
        smart_format: bool = True,
        keepalive_interval: float = 4.0,
        max_buffer_seconds: float = 20.0,
        retry: RetryPolicy | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        fallback: stt.STT[Any] | None = None,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        self.endpoint = endpoint or DeepgramEndpoint()
        self._model, self.language = model, LanguageCode(language)
        self.sample_rate, self.encoding = sample_rate, encoding
        self.endpointing_ms, self.utterance_end_ms = endpointing_ms, utterance_end_ms
        self.keyterms, self.smart_format = tuple(keyterms), smart_format
        self.keepalive_interval, self.max_buffer_seconds = keepalive_interval, max_buffer_seconds
        self.retry = retry or RetryPolicy()
        self.clock: Clock = clock or SystemClock()
        self.sleep: Sleep = sleep or self.clock.sleep
        self.fallback = fallback

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "deepgram"

    def query(self) -> dict[str, Any]:
        """The `/v1/listen` options for the SDK's `listen.v1.connect`."""
        options: dict[str, Any] = {
            "model": self._model,
            "language": self.language,
            "encoding": self.encoding,
            "sample_rate": self.sample_rate,
            "channels": 1,
            "interim_results": True,
            "vad_events": True,
            "smart_format": self.smart_format,
            "endpointing": self.endpointing_ms if self.endpointing_ms is not None else False,
        }
        if self.utterance_end_ms is not None:
            options["utterance_end_ms"] = self.utterance_end_ms
        if self.keyterms:
            if self._model.startswith("nova-3"):
                options["keyterm"] = list(self.keyterms)
            else:
                options["keywords"] = list(self.keyterms)
        return options

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> DeepgramSTTStream:
        """A live recognition; push frames at `sample_rate` (others are resampled)."""
        return DeepgramSTTStream(stt=self, conn_options=conn_options)

    async def _recognize_impl(
        self,
        buffer: utils.AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> stt.SpeechEvent:
        # One-shot recognition over the live socket: push it all, end input, join the finals.
        stream = self.stream(conn_options=conn_options)
        for frame in buffer if isinstance(buffer, list) else [buffer]:
            stream.push_frame(frame)
        stream.end_input()
        texts = [
            event.alternatives[0].text
            async for event in stream
            if event.type is stt.SpeechEventType.FINAL_TRANSCRIPT and event.alternatives
        ]
        data = stt.SpeechData(language=self.language, text=" ".join(t for t in texts if t))
        return stt.SpeechEvent(type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[data])


class DeepgramSTTStream(stt.RecognizeStream):
    """One caller's live recognition; reconnects and falls back on its own (so livekit's
    retry loop, which would lose the audio in flight, never sees a retryable error)."""

    def __init__(self, *, stt: DeepgramSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options, sample_rate=stt.sample_rate)
        self._dg = stt
        width = 1 if stt.encoding == "mulaw" else 2
        self._ledger = AudioLedger(stt.sample_rate * width, stt.max_buffer_seconds)
        self._wake = asyncio.Event()
        self._request_id = uuid.uuid4().hex[:12]
        self._speaking = False
        self._attempt = 0
        self._last_send = stt.clock.now()
        self._usage_seconds = 0.0
        self.reconnects = 0

    async def _run(self) -> None:
        reader = asyncio.create_task(self._read_input())
        try:
            await self._serve()
        finally:
            await cancel_and_wait(reader)

    async def _read_input(self) -> None:
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                self._ledger.mark("finalize")
            else:
                pcm = bytes(item.data)
                self._ledger.push(lin2ulaw(pcm) if self._dg.encoding == "mulaw" else pcm)
                self._usage_seconds += item.duration
            self._wake.set()
        self._ledger.mark("end")
        self._wake.set()

    # -- connection lifecycle -------------------------------------------------------------

    async def _serve(self) -> None:
        policy = self._dg.retry
        while True:
            try:
                await self._connection()
                return
            except (asyncio.CancelledError, APIConnectionError):
                raise
            except Exception as exc:
                refused = auth_error(exc, self._dg.endpoint)
                self._attempt += 1
                if refused is not None or not is_retryable(exc) or self._attempt > policy.attempts:
                    await self._give_up(refused or exc)
                    return
                status = fault_status(exc)
                delay = policy.delay(self._attempt, status)
                what = f"HTTP {status}" if status is not None else type(exc).__name__
                self._report(
                    f"Deepgram STT {what} ({exc}); reconnecting in {delay:.2f} s "
                    f"(attempt {self._attempt} of {policy.attempts})",
                    status,
                )
                await self._dg.sleep(delay)

    async def _connection(self) -> None:
        client = self._dg.endpoint.client()
        async with client.listen.v1.connect(**self._dg.query()) as socket:
            if self._attempt:
                self.reconnects += 1
                log.info("Deepgram STT reconnected after %d attempt(s)", self._attempt)
            origin = self._ledger.reconnected()
            receiver = asyncio.create_task(self._receive(socket, origin))
            keepalive = asyncio.create_task(self._keepalive(socket))
            try:
                await self._send(socket, receiver)
            finally:
                for task in (receiver, keepalive):
                    await cancel_and_wait(task)

    async def _send(self, socket: Any, receiver: asyncio.Task[None]) -> None:
        ledger = self._ledger
        while True:
            while not ledger.has_unsent():
                self._wake.clear()
                waiter = asyncio.create_task(self._wake.wait())
                await asyncio.wait({waiter, receiver}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if receiver.done():
                    receiver.result()  # the socket failed: raise its error
                    raise ConnectionError("Deepgram closed the listen socket")
            item = ledger.next_unsent()
            if item == "end":
                await socket.send_close_stream()
                ledger.sent()
                await asyncio.wait_for(receiver, timeout=10.0)  # the last results, then close
                return
            if item == "finalize":
                await socket.send_finalize()
            elif isinstance(item, Chunk):
                await socket.send_media(item.data)
                self._last_send = self._dg.clock.now()
            ledger.sent()

    async def _keepalive(self, socket: Any) -> None:
        clock, interval = self._dg.clock, self._dg.keepalive_interval
        while True:
            await clock.sleep(max(0.0, self._last_send + interval - clock.now()))
            if clock.now() - self._last_send >= interval:
                try:
                    await socket.send_keep_alive()
                except Exception:
                    return  # the socket is gone; the receiver reports why
                self._last_send = clock.now()

    async def _give_up(self, exc: BaseException) -> None:
        fallback = self._dg.fallback
        message = f"Deepgram STT is unavailable: {exc}"
        if fallback is None:
            status = fault_status(exc)
            if status is not None:
                raise APIStatusError(message, status_code=status, retryable=False) from exc
            raise APIConnectionError(message, retryable=False) from exc
        log.warning("%s; falling back to %s for this call", message, fallback.label)
        self._report(f"{message}; falling back to {fallback.provider} ({fallback.model})", None)
        await self._fall_back(fallback)

    async def _fall_back(self, fallback: stt.STT[Any]) -> None:
        stream = fallback.stream()

        async def relay() -> None:
            async for event in stream:
                self._event_ch.send_nowait(event)

        relaying = asyncio.create_task(relay())
        try:
            while True:
                for item in self._ledger.drain():
                    if item == "end":
                        stream.end_input()
                        await relaying
                        return
                    if item == "finalize":
                        stream.flush()
                    elif isinstance(item, Chunk):
                        stream.push_frame(self._frame(item.data))
                self._wake.clear()
                await self._wake.wait()
        finally:
            relaying.cancel()
            await stream.aclose()

    def _frame(self, data: bytes) -> rtc.AudioFrame:
        pcm = ulaw2lin(data) if self._dg.encoding == "mulaw" else data
        return rtc.AudioFrame(pcm, self._dg.sample_rate, 1, len(pcm) // 2)

    def _report(self, message: str, status: int | None) -> None:
        log.warning(message)
        error: Exception = (
            APIStatusError(message, status_code=status)
            if status is not None
            else APIConnectionError(message)
        )
        self._dg.emit(
            "error",
            stt.STTError(
                timestamp=time.time(), label=self._dg.label, error=error, recoverable=True
            ),
        )

    # -- results --------------------------------------------------------------------------

    async def _receive(self, socket: Any, origin: float) -> None:
        async for message in socket:
            # only a socket that answers counts as healthy: one that is accepted and then
            # dropped at once must use up the retry budget, not loop forever
            self._attempt = 0
            kind = getattr(message, "type", None)  # unknown types parse as None: skip them
            if kind == "Results":
                self._on_results(message, origin)
            elif kind == "SpeechStarted":
                self._start_speech()
            elif kind == "UtteranceEnd":
                self._end_speech()
            elif kind == "Error":
                log.warning("Deepgram STT error message: %s", getattr(message, "description", ""))

    def _on_results(self, message: Any, origin: float) -> None:
        start, duration = float(message.start or 0.0), float(message.duration or 0.0)
        alternatives = message.channel.alternatives if message.channel else []
        best = alternatives[0] if alternatives else None
        text = (best.transcript or "").strip() if best is not None else ""
        finalized = bool(getattr(message, "from_finalize", False))
        if finalized:
            self._ledger.finalize_confirmed()
        elif message.is_final:
            self._ledger.confirmed_until(origin + start + duration)
        if text or (message.is_final and finalized):
            if text:
                self._start_speech()
            offset = self.start_time_offset + origin
            data = stt.SpeechData(
                language=self._dg.language,
                text=text,
                confidence=float(best.confidence or 0.0) if best is not None else 0.0,
                start_time=offset + start,
                end_time=offset + start + duration,
            )
            kind = (
                stt.SpeechEventType.FINAL_TRANSCRIPT
                if message.is_final
                else stt.SpeechEventType.INTERIM_TRANSCRIPT
            )
            self._event_ch.send_nowait(
                stt.SpeechEvent(type=kind, request_id=self._request_id, alternatives=[data])
            )
        if message.speech_final or finalized:
            self._end_speech()

    def _start_speech(self) -> None:
        if not self._speaking:
            self._speaking = True
            self._event_ch.send_nowait(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))

    def _end_speech(self) -> None:
        if not self._speaking:
            return
        self._speaking = False
        send = self._event_ch.send_nowait
        send(stt.SpeechEvent(type=stt.SpeechEventType.END_OF_SPEECH))
        if self._usage_seconds > 0:
            usage = stt.RecognitionUsage(audio_duration=self._usage_seconds)
            self._usage_seconds = 0.0
            send(
                stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    request_id=self._request_id,
                    recognition_usage=usage,
                )
            )
