"""livekit-agents TTS plugin for Deepgram Aura: :class:`DeepgramTTS`.

A streamed reply (``stream()``, what AgentSession uses for LLM replies) goes over the speak
socket: text in as it comes, `Speak` + `Flush` at each sentence end so the first sentence
plays while the model still writes, audio out as binary frames. A barge-in cancels the
stream; the socket then gets `Clear` and is reused for the next reply. `prewarm()` (livekit's
hook, called when a call starts) opens the socket ahead, so the first reply does not wait
for Deepgram's handshake. One-shot text
(``synthesize()``, `say`) uses REST `POST /v1/speak`. Output is raw `linear16` or, for
phone calls, `mulaw` at 8 kHz (decoded to PCM16 for livekit; G.711 round-trips exactly).
Connects and REST calls retry 429/5xx with backoff, each reported as a recoverable error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Literal, Never, TypeVar

from voicehub.core.clock import SystemClock
from voicehub.core.jobs import TaskSet
from voicehub.voice.audio import ulaw2lin
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.deepgram.connection import (
    DeepgramEndpoint,
    RetryPolicy,
    Sleep,
    auth_error,
    fault_status,
    is_retryable,
)
from voicehub.voice.providers.deepgram.speak_exchange import SentenceSplitter, spoken_audio
from voicehub.voice.providers.deepgram.speak_socket import SpeakSocket

with vendor_import("livekit-agents"):
    from livekit.agents import APIConnectionError, APIError, APIStatusError, tts
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

__all__ = ["DeepgramTTS"]

log = logging.getLogger("voicehub.voice.deepgram")

Encoding = Literal["linear16", "mulaw"]
T = TypeVar("T")


class DeepgramTTS(tts.TTS[Never]):  # Never: no events beyond livekit's own
    """Aura voices (`model`, e.g. "aura-2-thalia-en") at `sample_rate` in `encoding`."""

    def __init__(
        self,
        *,
        endpoint: DeepgramEndpoint | None = None,
        model: str = "aura-2-thalia-en",
        sample_rate: int = 24000,
        encoding: Encoding = "linear16",
        streaming: bool = True,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=streaming),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self.endpoint = endpoint or DeepgramEndpoint()
        self._model, self.encoding = model, encoding
        self.retry = retry or RetryPolicy()
        self.sleep: Sleep = sleep or SystemClock().sleep
        self._idle: SpeakSocket | None = None
        self._recycling = TaskSet("Deepgram's speak socket recycling")
        self._opening: asyncio.Task[None] | None = None  # `prewarm`'s socket, connecting

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return "deepgram"

    def query(self) -> dict[str, Any]:
        return {"model": self._model, "encoding": self.encoding, "sample_rate": self.sample_rate}

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        """One-shot synthesis over REST."""
        return _RestStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        """Streamed synthesis over the speak socket."""
        return _SocketStream(tts=self, conn_options=conn_options)

    def prewarm(self) -> None:
        """Open the speak socket now, in the background (call it on the event loop), for the
        first streamed reply to take. A failure here is only logged: that reply connects
        again, with the retries and the error reports of any connect."""
        if not self.capabilities.streaming or self._idle is not None or self._opening is not None:
            return
        self._opening = asyncio.get_running_loop().create_task(self._open_ahead())

    async def _open_ahead(self) -> None:
        try:
            socket = await SpeakSocket.open(self.endpoint.client(), **self.query())
        except Exception as exc:
            log.info("Deepgram speak socket not opened ahead (the first reply will): %s", exc)
            return
        self._keep(socket)

    async def aclose(self) -> None:
        """Close the idle speak socket, if any (and one still opening)."""
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await opening
        await self._recycling.wait()
        if self._idle is not None:
            await self._idle.aclose()
            self._idle = None

    # -- shared by the streams ---------------------------------------------------------------

    def decode(self, data: bytes) -> bytes:
        return ulaw2lin(data) if self.encoding == "mulaw" else data

    def exchange(self, socket: SpeakSocket, sentences: AsyncIterator[str]) -> AsyncIterator[bytes]:
        """The PCM16 of `sentences` spoken over `socket` (`speak_exchange`)."""
        whole_samples = self.encoding != "mulaw"
        return spoken_audio(socket, sentences, self.decode, whole_samples=whole_samples)

    async def speak_pcm(self, texts: AsyncIterator[str]) -> AsyncGenerator[bytes, None]:
        """`PcmSpeaker`: each text of `texts` said over the speak socket, its PCM16 at
        `sample_rate` yielded as each message arrives. What `stream()` says and plays,
        without livekit's stream around it (its tasks, channels, frames and spans per
        reply); a failure is reported as livekit's stream reports it (an "error" event)."""
        said = heard = False

        async def sentences() -> AsyncIterator[str]:
            nonlocal said
            async for sentence in _sentences_of(texts):
                said = said or bool(sentence.strip())
                yield sentence

        try:
            socket = await self.checkout()
        except APIError as error:
            self._failed(error)
            raise
        done = False
        try:
            async for pcm in self.exchange(socket, sentences()):
                if pcm:
                    heard = True
                    yield pcm
            done = True
        except APIError as error:
            self._failed(error)
            raise
        finally:
            self.give_back(socket, dirty=not done)
        if said and not heard:  # as livekit's stream checks a reply
            silent = APIError("no audio frames were pushed for the reply's text")
            self._failed(silent)
            raise silent

    def _failed(self, error: Exception) -> None:
        self.emit(
            "error",
            tts.TTSError(timestamp=time.time(), label=self.label, error=error, recoverable=False),
        )

    async def call(self, what: str, operation: Callable[[], Awaitable[T]]) -> T:
        """Run `operation`, retrying 429/5xx/network failures with backoff (each reported);
        a refused key or the last failure raises a non-retryable livekit APIError."""
        attempt = 0
        while True:
            try:
                return await operation()
            except Exception as exc:
                attempt += 1
                refused = auth_error(exc, self.endpoint)
                status = fault_status(exc)
                if refused is not None or not is_retryable(exc) or attempt > self.retry.attempts:
                    message = f"Deepgram TTS {what} failed: {refused or exc}"
                    if status is not None:
                        raise APIStatusError(message, status_code=status, retryable=False) from exc
                    raise APIConnectionError(message, retryable=False) from exc
                delay = self.retry.delay(attempt, status)
                self.report(
                    f"Deepgram TTS {what}: {f'HTTP {status}' if status else exc}; retrying in "
                    f"{delay:.2f} s (attempt {attempt} of {self.retry.attempts})",
                    status,
                )
                await self.sleep(delay)

    def report(self, message: str, status: int | None) -> None:
        log.warning(message)
        error: Exception = (
            APIStatusError(message, status_code=status)
            if status is not None
            else APIConnectionError(message)
        )
        self.emit(
            "error",
            tts.TTSError(timestamp=time.time(), label=self.label, error=error, recoverable=True),
        )

    async def checkout(self) -> SpeakSocket:
        """The idle speak socket (once a cut reply's `Clear` is answered, or once the one
        `prewarm` opens is open), or a new one."""
        if self._opening is not None:
            await asyncio.wait([self._opening])
            self._opening = None
        if self._recycling:
            await asyncio.wait(list(self._recycling))
        idle, self._idle = self._idle, None
        if idle is not None and not idle.closed:
            return idle
        client = self.endpoint.client()
        return await self.call("connect", lambda: SpeakSocket.open(client, **self.query()))

    def give_back(self, socket: SpeakSocket, *, dirty: bool) -> None:
        """Keep `socket` for the next reply; after a cut reply, `Clear` it first."""
        if socket.closed:
            return
        if not dirty:
            self._keep(socket)
            return

        async def recycle() -> None:
            if await socket.clear():
                self._keep(socket)
            else:
                await socket.aclose()

        self._recycling.start(recycle())

    def _keep(self, socket: SpeakSocket) -> None:
        if self._idle is None:
            self._idle = socket
        else:
            asyncio.get_running_loop().create_task(socket.aclose())


class _RestStream(tts.ChunkedStream):
    def __init__(self, *, tts: DeepgramTTS, input_text: str, conn_options: APIConnectOptions):
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._dg = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        dg = self._dg
        output_emitter.initialize(
            request_id=uuid.uuid4().hex[:12],
            sample_rate=dg.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        if not self.input_text.strip():
            return
        client = dg.endpoint.client()

        async def fetch() -> bytes:
            # all-or-nothing per attempt: a retry must not repeat audio already pushed
            chunks = client.speak.v1.audio.generate(
                text=self.input_text, container="none", **dg.query()
            )
            return b"".join([chunk async for chunk in chunks])

        audio = await dg.call("request", fetch)
        output_emitter.push(
            dg.decode(audio[: len(audio) // 2 * 2] if dg.encoding != "mulaw" else audio)
        )


class _SocketStream(tts.SynthesizeStream):
    def __init__(self, *, tts: DeepgramTTS, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._dg = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        dg = self._dg
        request_id = uuid.uuid4().hex[:12]
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=dg.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        socket = await dg.checkout()
        done, started = False, False
        try:
            async for pcm in dg.exchange(socket, self._sentences()):
                if not started:
                    output_emitter.start_segment(segment_id=request_id)
                    started = True
                output_emitter.push(pcm)
            done = True
        finally:
            dg.give_back(socket, dirty=not done)
        if started:
            output_emitter.end_segment()

    async def _sentences(self) -> AsyncIterator[str]:
        splitter = SentenceSplitter()
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                yield splitter.flush()
                continue
            for sentence in splitter.push(item):
                yield sentence
        yield splitter.flush()


async def _sentences_of(texts: AsyncIterator[str]) -> AsyncIterator[str]:
    """Each text's sentences, then its rest: a text is pushed and flushed as it comes."""
    splitter = SentenceSplitter()
    async for text in texts:
        if not text.strip():
            continue
        for sentence in splitter.push(text):
            yield sentence
        yield splitter.flush()
