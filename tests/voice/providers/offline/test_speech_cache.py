"""Rendered lines kept by CachedSpeechEngine: the same samples, rendered once, bounded."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from voicehub.voice.audio import Int16Array
from voicehub.voice.providers.offline import synthesize
from voicehub.voice.providers.offline.speech_cache import CachedSpeechEngine
from voicehub.voice.providers.offline.tts_engines import load_engine


class CountingEngine:
    """Two sentences per text, 100 samples each; counts the renders."""

    sample_rate = 22050

    def __init__(self) -> None:
        self.renders: list[str] = []

    def sentences(self, text: str) -> Iterator[Int16Array]:
        self.renders.append(text)
        for number in range(2):
            yield np.full(100, len(text) + number, dtype=np.int16)


def test_a_line_said_again_is_not_rendered_again() -> None:
    engine = CountingEngine()
    cached = CachedSpeechEngine(engine)
    first = list(cached.sentences("hello there"))
    first[0][:] = 0  # a caller changing its copy does not change the kept line
    again = list(cached.sentences("hello there"))
    assert engine.renders == ["hello there"]
    assert [chunk.tolist() for chunk in again] == [[11] * 100, [12] * 100]
    assert (cached.hits, cached.misses) == (1, 1)


def test_the_cache_keeps_at_most_its_bytes_and_skips_long_texts() -> None:
    engine = CountingEngine()
    cached = CachedSpeechEngine(engine, max_bytes=800, max_text=20)  # two lines of 400 B
    for text in ("one", "two", "three", "one"):
        list(cached.sentences(text))
    assert engine.renders == ["one", "two", "three", "one"]  # "one" was evicted by "three"
    assert cached.cached_bytes == 800
    long_text = "x" * 21
    list(cached.sentences(long_text))
    list(cached.sentences(long_text))
    assert engine.renders[-2:] == [long_text, long_text]


def test_a_line_abandoned_halfway_is_not_kept() -> None:
    engine = CountingEngine()
    cached = CachedSpeechEngine(engine)
    next(cached.sentences("cut short"))  # a barge-in: the rest was never rendered
    list(cached.sentences("cut short"))
    assert engine.renders == ["cut short", "cut short"]


def test_piper_is_cached_and_says_a_line_the_same_way_twice() -> None:
    engine = load_engine("piper")
    assert isinstance(engine, CachedSpeechEngine)
    text = "the analysts found three things about heat pumps"
    first = synthesize(text, voice="piper", sample_rate=16000)
    hits = engine.hits
    assert synthesize(text, voice="piper", sample_rate=16000) == first
    assert engine.hits == hits + 1
