"""Speech audio from any livekit TTS, as PCM16 at the transport's rate."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from voicehub.voice.audio import Resampler, int16_to_pcm16

__all__ = ["one_text", "synthesized_pcm"]


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
    resampler: Resampler | None = None
    resampler_from = 0
    async for text in texts:
        if not text.strip():
            continue
        async with tts.synthesize(text) as stream:
            async for chunk in stream:
                frame = chunk.frame
                if first_audio is not None:
                    first_audio()
                    first_audio = None
                pcm = frame.data.tobytes()
                if frame.sample_rate != sample_rate:
                    if resampler is None or resampler_from != frame.sample_rate:
                        resampler = Resampler(frame.sample_rate, sample_rate)
                        resampler_from = frame.sample_rate
                    pcm = int16_to_pcm16(resampler.push(pcm))
                if pcm:
                    yield pcm
    if resampler is not None:
        rest = int16_to_pcm16(resampler.flush())
        if rest:
            yield rest


async def one_text(text: str) -> AsyncIterator[str]:
    """`text` as a stream of one."""
    yield text
