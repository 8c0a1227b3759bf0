"""Rendered speech kept for lines an engine says again: :class:`CachedSpeechEngine`.

A desk repeats itself: every call hears the same greeting, the same confirmations, the
same results for the same topic. Piper costs about 50 ms of CPU per second of speech, so at
100 calls re-rendering those lines alone took more than the two cores of the machine
(measured with `voicehub soak`). Piper is deterministic (zero noise scales), so a line
rendered once sounds the same every time it is played from here. The cache is bounded in
bytes and evicts the least recently used line; long texts (unlikely to repeat) are not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from voicehub.voice.audio import Int16Array
from voicehub.voice.providers.offline.tts_engines import SpeechEngine

__all__ = ["CachedSpeechEngine"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # about 25 minutes of 22.05 kHz speech
DEFAULT_MAX_TEXT = 400  # characters; longer texts are rendered every time


class CachedSpeechEngine:
    """``engine`` with its rendered lines kept, up to ``max_bytes`` of samples in all."""

    def __init__(
        self,
        engine: SpeechEngine,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_text: int = DEFAULT_MAX_TEXT,
    ) -> None:
        self.engine = engine
        self.max_bytes = max_bytes
        self.max_text = max_text
        # (how it was asked for: "sentences" or "pieces", the text) -> its chunks
        self._lines: OrderedDict[tuple[str, str], tuple[Int16Array, ...]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # worker threads render and look up at once
        self.hits = 0
        self.misses = 0

    @property
    def sample_rate(self) -> int:
        """The engine's native rate."""
        return self.engine.sample_rate

    @property
    def cached_bytes(self) -> int:
        """Bytes of samples kept now."""
        return self._bytes

    def sentences(self, text: str) -> Iterator[Int16Array]:
        """The engine's sentences for ``text``: kept ones at once, else rendered (and kept
        once the whole line has rendered)."""
        return self._kept_or(("sentences", text), self.engine.sentences)

    def pieces(self, text: str) -> Iterator[Int16Array]:
        """The engine's pieces for ``text`` (kept apart from its sentences: they differ)."""
        return self._kept_or(("pieces", text), self.engine.pieces)

    def _kept_or(
        self, key: tuple[str, str], render: Callable[[str], Iterator[Int16Array]]
    ) -> Iterator[Int16Array]:
        with self._lock:
            kept = self._lines.get(key)
            if kept is not None:
                self._lines.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
        if kept is not None:
            yield from (chunk.copy() for chunk in kept)  # callers may change their copy
            return
        rendered: list[Int16Array] = []
        for chunk in render(key[1]):
            rendered.append(chunk.copy())
            yield chunk
        if len(key[1]) <= self.max_text:
            self._keep(key, tuple(rendered))

    def _keep(self, key: tuple[str, str], chunks: tuple[Int16Array, ...]) -> None:
        size = sum(chunk.nbytes for chunk in chunks)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._lines:
                return  # another call rendered it meanwhile
            self._lines[key] = chunks
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, evicted = self._lines.popitem(last=False)
                self._bytes -= sum(chunk.nbytes for chunk in evicted)
