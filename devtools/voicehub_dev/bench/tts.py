"""`voicehub bench --only tts`: how soon the embedded voice's first audio comes.

`first_audio_ms`: from asking Piper's livekit plugin (`PiperTTS`, as a reply asks it) for a
reply of about 4 s of speech to its first audio frame, median and p95 over the rounds' runs,
on one thread as a call's synthesis runs. Under `whole_sentence`, the same with the voice
rendering each sentence whole before its first sample (Piper's own `synthesize`), measured
interleaved with the chunked runs in one window. `first_piece_ms`: the engine alone, without
the plugin's thread hop and resampling.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from voicehub_dev.bench.stats import summary_ms

REPLY = "Sure, I will look into heat pumps for you. I will tell you what the analysts find."
"""About 4 s of the joe voice (`reply_seconds` says how long)."""


class WholeSentences:
    """An engine as Piper spoke before chunking: its `pieces` are whole sentences."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def sample_rate(self) -> int:
        rate: int = self.engine.sample_rate
        return rate

    def sentences(self, text: str) -> Iterator[Any]:
        return self.engine.sentences(text)  # type: ignore[no-any-return]

    def pieces(self, text: str) -> Iterator[Any]:
        return self.engine.sentences(text)  # type: ignore[no-any-return]


def piper_plugin(engine: Any) -> Any:
    """Piper's livekit plugin speaking with `engine` (a `PiperEngine`, or one wrapped in
    `WholeSentences`)."""
    from voicehub.voice.providers.offline import PiperTTS

    class Plugin(PiperTTS):
        async def engine(self) -> Any:
            return speaker

    speaker = engine
    return Plugin()


async def _first_frame(tts: Any) -> float:
    """Seconds from asking `tts` for the reply to its first frame."""
    started = time.perf_counter()
    stream = tts.synthesize(REPLY)
    try:
        async for _ in stream:
            return time.perf_counter() - started
    finally:
        await stream.aclose()
    raise RuntimeError("the voice said nothing")


def _first_piece(engine: Any) -> float:
    """Seconds from asking `engine` for the reply to its first piece."""
    started = time.perf_counter()
    pieces = engine.pieces(REPLY)
    next(pieces)
    elapsed = time.perf_counter() - started
    pieces.close()
    return elapsed


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    from voicehub.voice.providers.offline.tts_engines import PiperEngine

    engine = await asyncio.to_thread(PiperEngine.load)  # no speech cache: every run renders
    whole = WholeSentences(engine)
    chunked_tts, whole_tts = piper_plugin(engine), piper_plugin(whole)
    seconds = sum(p.size for p in engine.pieces(REPLY)) / engine.sample_rate
    runs = 4 if quick else 12
    chunked: list[float] = []
    sentences: list[float] = []
    chunked_engine: list[float] = []
    whole_engine: list[float] = []
    for _ in range(runs):  # interleaved: the same load for both
        chunked.append(await _first_frame(chunked_tts))
        sentences.append(await _first_frame(whole_tts))
        chunked_engine.append(await asyncio.to_thread(_first_piece, engine))
        whole_engine.append(await asyncio.to_thread(_first_piece, whole))
    return {
        "tts": {
            "first_audio_ms": summary_ms(chunked),
            "first_piece_ms": summary_ms(chunked_engine),
            "whole_sentence": {
                "first_audio_ms": summary_ms(sentences),
                "first_piece_ms": summary_ms(whole_engine),
            },
            "reply_seconds": round(seconds, 2),
            "runs": runs,
        }
    }
