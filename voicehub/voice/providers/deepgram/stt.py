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

Caller audio goes out in chunks of `send_ms` (100 ms by default; Deepgram asks for 20 to
250 ms per message): one WebSocket message and one socket write per chunk, not per 20 ms
frame. A flush (the end of a turn) sends what is waiting at once, before `Finalize`, so the
chunking adds nothing to the end of a turn. Frames are taken in `push_frame`'s own call
(no channel, no task wake-up per frame); the sending task wakes once per chunk. The stream
is a `DirectEvents`: after `deliver_to(sink)` its speech events go to `sink` as they are
read off the socket, not through livekit's event channel and its two readers. Results are
read as Deepgram's JSON off voicehub's own socket (`socket_transport.PlainSocket`), by the
wire's field names; the SDK opens the socket and sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from voicehub.voice.providers.deepgram.socket_transport import PlainSocket, opened_sockets
from voicehub.voice.providers.deepgram.stt_audio import AudioLedger, Chunk

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import APIConnectionError, APIStatusError, stt, utils
    from livekit.agents.language import LanguageCode
    from livekit.agents.metrics import STTMetrics
    from livekit.agents.metrics.base import Metadata
    from livekit.agents.types import (
        DEFAULT_API_CONNECT_OPTIONS,
        NOT_GIVEN,
        APIConnectOptions,
        NotGivenOr,
    )

__all__ = ["DeepgramLink", "DeepgramSTT", "DeepgramSTTStream"]

log = logging.getLogger("voicehub.voice.deepgram")

Encoding = Literal["linear16", "mulaw"]
SpeechSink = Callable[[stt.SpeechEvent], None]


@dataclass(frozen=True, slots=True)
class DeepgramLink:
    """How a DeepgramSTT keeps its socket: `send_ms` of audio per message (20-250 ms, as
    Deepgram asks; a flush sends at once), a KeepAlive every `keepalive_interval` seconds
    without audio (timed on `clock`), at most `max_buffer_seconds` of audio held while the
    socket is down, reconnections by `retry` (backing off with `sleep`), and `fallback`, the
    recognizer used once the retries are spent."""

    keepalive_interval: float = 4.0
    send_ms: int = 100
    max_buffer_seconds: float = 20.0
    retry: RetryPolicy | None = None
    fallback: stt.STT[Any] | None = None
    clock: Clock | None = None
    sleep: Sleep | None = None


class DeepgramSTT(stt.STT[Never]):  # Never: no events beyond livekit's own
    """Streaming Deepgram recognition (Nova) behind livekit's `stt.STT`.

    `encoding="mulaw"` with `sample_rate=8000` sends phone audio as G.711 without
    resampling. `keyterms` prompt the recognizer with the desk's vocabulary (`keyterm` on
    nova-3, `keywords` on older models). `link` says how the socket is kept
    (`DeepgramLink`: message size, KeepAlive, buffer, retries, fallback, clock).
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
        link: DeepgramLink | None = None,
    ) -> None:
        super().__init__(
            capabilities=stt.STTCapabilities(
                streaming=True, interim_results=True, manual_flush=True
            )
        )
        link = link or DeepgramLink()
        self.endpoint = endpoint or DeepgramEndpoint()
        self._model, self.language = model, LanguageCode(language)
        self.sample_rate, self.encoding = sample_rate, encoding
        self.endpointing_ms, self.utterance_end_ms = endpointing_ms, utterance_end_ms
        self.keyterms, self.smart_format = tuple(keyterms), smart_format
        self.keepalive_interval = link.keepalive_interval
        self.max_buffer_seconds = link.max_buffer_seconds
        if not 20 <= link.send_ms <= 250:
            raise ValueError(
                f"send_ms must be from 20 to 250 (Deepgram's range), got {link.send_ms}"
            )
        self.send_ms = link.send_ms
        self.retry = link.retry or RetryPolicy()
        self.clock: Clock = link.clock or SystemClock()
        self.sleep: Sleep = link.sleep or self.clock.sleep
        self.fallback = link.fallback

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
    retry loop, which would lose the audio in flight, never sees a retryable error).

    Frames are taken synchronously by `push_frame` (resampled first if they are not at the
    plugin's rate) and sent in chunks (see the module docstring)."""

    def __init__(self, *, stt: DeepgramSTT, conn_options: APIConnectOptions) -> None:
        super().__init__(stt=stt, conn_options=conn_options, sample_rate=stt.sample_rate)
        self._dg = stt
        self._mulaw = stt.encoding == "mulaw"
        width = 1 if self._mulaw else 2
        self._ledger = AudioLedger(stt.sample_rate * width, stt.max_buffer_seconds)
        self._rate = stt.sample_rate
        self._chunk_bytes = stt.sample_rate * 2 * stt.send_ms // 1000  # of PCM16
        self._pending = bytearray()  # PCM16 not yet cut into a chunk
        self._resampler: rtc.AudioResampler | None = None
        self._wake = asyncio.Event()
        self._sink: SpeechSink | None = None
        self._request_id = uuid.uuid4().hex[:12]
        self._speaking = False
        self._attempt = 0
        self._last_send = stt.clock.now()
        self._cut_bytes = self._reported_bytes = 0  # PCM16 cut into chunks, and billed
        self.reconnects = 0

    # -- DirectEvents ---------------------------------------------------------------------

    def deliver_to(self, sink: SpeechSink) -> None:
        """From now on hand every speech event to `sink` as it is read off the socket
        (`voicehub.voice.engine.direct_events.DirectEvents`); none go to the iterator."""
        self._sink = sink

    def _emit(self, event: stt.SpeechEvent) -> None:
        sink = self._sink
        if sink is None:
            self._event_ch.send_nowait(event)
            return
        if event.type is stt.SpeechEventType.RECOGNITION_USAGE:
            self._emit_usage_metrics(event)  # what livekit's monitor task does off the channel
        sink(event)

    def _emit_usage_metrics(self, event: stt.SpeechEvent) -> None:
        usage = event.recognition_usage
        assert usage is not None
        dg = self._dg
        metrics = STTMetrics(
            request_id=event.request_id,
            timestamp=time.time(),
            duration=0.0,
            label=dg.label,
            audio_duration=usage.audio_duration,
            streamed=True,
            metadata=Metadata(model_name=dg.model, model_provider=dg.provider),
        )
        dg.emit("metrics_collected", metrics)

    # -- input ----------------------------------------------------------------------------

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Take one frame of caller audio (PCM16 mono) now; a chunk goes out when full."""
        self._check_open()
        if frame.sample_rate != self._rate:
            if self._resampler is None:
                self._resampler = rtc.AudioResampler(
                    frame.sample_rate, self._rate, quality=rtc.AudioResamplerQuality.HIGH
                )
            for resampled in self._resampler.push(frame):
                self._take(resampled.data)
            return
        self._take(frame.data)

    def flush(self) -> None:
        """The end of a turn: send what waits, then `Finalize`."""
        self._check_open()
        if self._resampler is not None:
            for resampled in self._resampler.flush():
                self._take(resampled.data)
        self._cut()
        self._ledger.mark("finalize")
        self._wake.set()

    def end_input(self) -> None:
        """No more audio: flush, then `CloseStream` once everything went out."""
        self.flush()
        self._ledger.mark("end")
        self._wake.set()
        self._input_ch.close()

    def _check_open(self) -> None:
        if self._input_ch.closed or self._event_ch.closed:
            raise RuntimeError(f"{type(self).__name__}: the stream's input has ended")

    def _take(self, pcm: memoryview) -> None:
        pending = self._pending
        pending += pcm  # a bytearray takes the 16-bit view's bytes as they are
        if len(pending) >= self._chunk_bytes:
            self._cut()
            self._wake.set()

    def _cut(self) -> None:
        """What waits becomes one chunk in the ledger (encoded for the wire)."""
        pending = self._pending
        if not pending:
            return
        self._cut_bytes += len(pending)
        self._ledger.push(lin2ulaw(pending) if self._mulaw else bytes(pending))
        pending.clear()

    async def _run(self) -> None:
        await self._serve()

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
        async with contextlib.AsyncExitStack() as stack:
            with opened_sockets() as opened:
                socket = await stack.enter_async_context(
                    client.listen.v1.connect(**self._dg.query())
                )
            for plain in opened:
                await plain.open()  # the handshake: a refusal raises here, with its status
            if len(opened) != 1:
                raise RuntimeError(
                    f"expected one Deepgram listen socket, the SDK opened {len(opened)}"
                )
            if self._attempt:
                self.reconnects += 1
                log.info("Deepgram STT reconnected after %d attempt(s)", self._attempt)
            origin = self._ledger.reconnected()
            receiver = asyncio.create_task(self._receive(opened[0], origin))
            keepalive = asyncio.create_task(self._keepalive(socket))
            try:
                await self._send(socket, receiver)
            finally:
                for task in (receiver, keepalive):
                    await cancel_and_wait(task)

    async def _send(self, socket: Any, receiver: asyncio.Task[None]) -> None:
        ledger, wake = self._ledger, self._wake
        receiver.add_done_callback(lambda _: wake.set())  # a failed socket wakes the sender
        while True:
            while not ledger.has_unsent():
                if receiver.done():
                    receiver.result()  # the socket failed: raise its error
                    raise ConnectionError("Deepgram closed the listen socket")
                wake.clear()
                await wake.wait()
            item = ledger.next_unsent()
            if item == "end":
                await socket.send_close_stream()
                ledger.sent()
                async with asyncio.timeout(10.0):  # the last results, then close
                    await receiver
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
                self._emit(event)

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

    async def _receive(self, socket: PlainSocket, origin: float) -> None:
        # The results are read off our own socket as JSON, not through the SDK's iterator,
        # which builds pydantic models of every message by trying each type of its union
        # (most of the receive path's CPU); the fields read are Deepgram's wire names.
        async for raw in socket:
            # only a socket that answers counts as healthy: one that is accepted and then
            # dropped at once must use up the retry budget, not loop forever
            self._attempt = 0
            if isinstance(raw, bytes):
                continue  # the listen socket sends no audio
            try:
                message = json.loads(raw)
            except ValueError:
                log.warning("Deepgram STT sent a message that is not JSON: %.80r", raw)
                continue
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "Results":
                self._on_results(message, origin)
            elif kind == "SpeechStarted":
                self._start_speech()
            elif kind == "UtteranceEnd":
                self._end_speech()
            elif kind == "Error":
                log.warning("Deepgram STT error message: %s", message.get("description", ""))

    def _on_results(self, message: dict[str, Any], origin: float) -> None:
        start = float(message.get("start") or 0.0)
        duration = float(message.get("duration") or 0.0)
        channel = message.get("channel") or {}
        alternatives = channel.get("alternatives") or []
        best = alternatives[0] if alternatives else None
        text = (best.get("transcript") or "").strip() if best is not None else ""
        finalized = bool(message.get("from_finalize"))
        is_final = bool(message.get("is_final"))
        if finalized:
            self._ledger.finalize_confirmed()
        elif is_final:
            self._ledger.confirmed_until(origin + start + duration)
        if text or (is_final and finalized):
            if text:
                self._start_speech()
            offset = self.start_time_offset + origin
            data = stt.SpeechData(
                language=self._dg.language,
                text=text,
                confidence=float(best.get("confidence") or 0.0) if best is not None else 0.0,
                start_time=offset + start,
                end_time=offset + start + duration,
            )
            kind = (
                stt.SpeechEventType.FINAL_TRANSCRIPT
                if is_final
                else stt.SpeechEventType.INTERIM_TRANSCRIPT
            )
            self._emit(stt.SpeechEvent(type=kind, request_id=self._request_id, alternatives=[data]))
        if message.get("speech_final") or finalized:
            self._end_speech()

    def _start_speech(self) -> None:
        if not self._speaking:
            self._speaking = True
            self._emit(stt.SpeechEvent(type=stt.SpeechEventType.START_OF_SPEECH))

    def _end_speech(self) -> None:
        if not self._speaking:
            return
        self._speaking = False
        send = self._emit
        send(stt.SpeechEvent(type=stt.SpeechEventType.END_OF_SPEECH))
        taken = self._cut_bytes + len(self._pending)
        if taken > self._reported_bytes:
            seconds = (taken - self._reported_bytes) / (2 * self._rate)
            self._reported_bytes = taken
            usage = stt.RecognitionUsage(audio_duration=seconds)
            send(
                stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    request_id=self._request_id,
                    recognition_usage=usage,
                )
            )
