"""Speech audio from any livekit TTS, as PCM16 at the transport's rate.

A TTS that is a `PcmSpeaker` (Deepgram's) hands its PCM16 over itself, message by message:
no livekit stream, tasks or frames between its socket and the player. Another streaming TTS
(`capabilities.streaming`: a speak socket) gets the texts on one `stream()`, each pushed and
flushed as it comes, while its audio is read; another TTS synthesizes each text with
`synthesize()`, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

from voicehub.voice.audio import Resampler, int16_to_pcm16

__all__ = ["PcmSpeaker", "one_text", "synthesized_pcm"]


@runtime_checkable
class PcmSpeaker(Protocol):
    """A TTS that says a reply's texts (each pushed and flushed as it comes) and yields
    PCM16 mono at its `sample_rate` as it arrives."""

    @property
    def sample_rate(self) -> int: ...

    def speak_pcm(self, texts: AsyncIterator[str]) -> AsyncGenerator[bytes, None]: ...


async def synthesized_pcm(
    tts: Any,
    texts: AsyncIterator[str],
    sample_rate: int,
    *,
    first_audio: Callable[[], None] | None = None,
) -> AsyncIterator[bytes]:
    """Each text of `texts` synthesized by `tts` (a livekit `tts.TTS`), in order, as PCM16
    mono at `sample_rate` (resampled when the TTS speaks at another rate).
    `first_audio` is called when the first audio of all arrives (time to first byte)."""
    converter = _ToRate(sample_rate)
    # closed with this generator: a cut reply gives its socket back at once
    async with contextlib.aclosing(_pcm_of(tts, texts)) as chunks:
        async for chunk, rate in chunks:
            if first_audio is not None:
                first_audio()
                first_audio = None
            pcm = converter.convert(chunk, rate)
            if pcm:
                yield pcm
    rest = converter.flush()
    if rest:
        yield rest


async def _pcm_of(tts: Any, texts: AsyncIterator[str]) -> AsyncGenerator[tuple[bytes, int], None]:
    """The TTS's audio as it comes: (PCM16 mono, its rate)."""
    if _speaks_pcm(tts):
        speaker: PcmSpeaker = tts
        spoken = speaker.speak_pcm(texts)
        try:
            async for chunk in spoken:
                yield chunk, speaker.sample_rate
        finally:
            await spoken.aclose()
        return
    streaming = bool(tts.capabilities.streaming)  # a livekit TTS says
    async for frame in _streamed(tts, texts) if streaming else _chunked(tts, texts):
        yield frame.data.tobytes(), frame.sample_rate


_SPEAKS_PCM: dict[type, bool] = {}


def _speaks_pcm(tts: object) -> bool:
    """Whether `tts` is a `PcmSpeaker`: checked once per class (a runtime-checkable
    isinstance walks the class, too slow to do for every reply)."""
    kind = type(tts)
    known = _SPEAKS_PCM.get(kind)
    if known is None:
        known = _SPEAKS_PCM[kind] = isinstance(tts, PcmSpeaker)
    return known


async def one_text(text: str) -> AsyncIterator[str]:
    """`text` as a stream of one."""
    yield text


async def _chunked(tts: Any, texts: AsyncIterator[str]) -> AsyncIterator[Any]:
    async for text in texts:
        if not text.strip():
            continue
        async with tts.synthesize(text) as stream:
            async for chunk in stream:
                yield chunk.frame


async def _streamed(tts: Any, texts: AsyncIterator[str]) -> AsyncIterator[Any]:
    stream = tts.stream()

    async def feed() -> None:
        async for text in texts:
            if text.strip():
                stream.push_text(text)
                stream.flush()
        stream.end_input()

    feeding = asyncio.create_task(feed())
    try:
        async for chunk in stream:
            yield chunk.frame
        await feeding  # a failed feed is the speech's failure
    finally:
        feeding.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await feeding
        await stream.aclose()


class _ToRate:
    """PCM16 audio at any rate as PCM16 at one rate (resampled when they differ)."""

    def __init__(self, sample_rate: int) -> None:
        self.rate = sample_rate
        self._resampler: Resampler | None = None
        self._from = 0

    def convert(self, pcm: bytes, rate: int) -> bytes:
        if rate == self.rate:
            return pcm
        if self._resampler is None or self._from != rate:
            self._resampler, self._from = Resampler(rate, self.rate), rate
        return int16_to_pcm16(self._resampler.push(pcm))

    def flush(self) -> bytes:
        return int16_to_pcm16(self._resampler.flush()) if self._resampler is not None else b""
