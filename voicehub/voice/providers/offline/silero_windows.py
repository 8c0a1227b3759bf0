"""The pieces of a Silero stream: samples waiting for a window, a cut window, and the
speech buffer its events carry."""

from __future__ import annotations

import numpy as np

__all__ = ["INT16_MAX", "WINDOW", "PendingSamples", "SpeechBuffer", "Window"]

INT16_MAX = np.iinfo(np.int16).max  # livekit scales samples to the model by this
WINDOW = {16000: (512, 64), 8000: (256, 32)}  # model rate: samples per window, of context


class Window:
    """One window cut for inference, and when it was queued (for livekit's timings)."""

    __slots__ = ("data", "input", "queued_at")

    def __init__(self, data: np.ndarray, input_: np.ndarray, queued_at: float) -> None:
        # int16 at the model's rate (the batcher scales a whole batch to float at once);
        # the same array as `input` when the rates are equal
        self.data = data
        self.input = input_  # int16, the input rate: what the window's events carry
        self.queued_at = queued_at


class PendingSamples:
    """int16 samples not yet in a window: appended per frame (any buffer: a frame's
    `data`), taken per window as a new array."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    @property
    def size(self) -> int:
        """Samples waiting."""
        return len(self.buf) >> 1

    def append(self, samples: memoryview) -> None:
        self.buf += samples

    def take(self, count: int) -> np.ndarray:
        """The first `count` samples (fewer if fewer), removed."""
        size = min(2 * count, len(self.buf))
        taken = np.frombuffer(self.buf, dtype=np.int16, count=size >> 1).copy()
        del self.buf[:size]
        return taken

    def clear(self) -> None:
        self.buf.clear()


class SpeechBuffer:
    """livekit's Silero speech buffer: the pre-roll and the speech so far, at most `limit`
    samples (the rest of an utterance that long is dropped).

    livekit copies the pre-roll to the front after every window out of speech; here the
    kept audio is a moving slice of a larger array, moved to the front only when the array
    is used up (once every few seconds of silence), which keeps the same audio for far
    fewer copies. The array starts at `initial` samples and doubles as speech needs.
    """

    __slots__ = ("buf", "end", "full", "limit", "start")

    def __init__(self, limit: int, initial: int) -> None:
        self.limit = limit
        self.buf = np.empty(max(1, min(initial, limit)), dtype=np.int16)
        self.start = self.end = 0
        self.full = False  # the limit was reached (livekit warns once per utterance)

    def __len__(self) -> int:
        return self.end - self.start

    def append(self, samples: np.ndarray) -> bool:
        """Add what fits under the limit; False when nothing fit (the buffer is full)."""
        count = min(len(samples), self.limit - (self.end - self.start))
        if count <= 0:
            return False
        if self.end + count > len(self.buf):
            self._make_room(count)
        self.buf[self.end : self.end + count] = samples[:count]
        self.end += count
        return True

    def keep_last(self, count: int) -> None:
        """Keep only the last `count` samples (the pre-roll of the next speech)."""
        if self.end - self.start <= count:
            return
        self.start = self.end - count
        self.full = False

    def audio(self) -> np.ndarray:
        """The samples kept (a view: copy it before the next change)."""
        return self.buf[self.start : self.end]

    def clear(self) -> None:
        self.start = self.end = 0
        self.full = False

    def _make_room(self, count: int) -> None:
        used = self.end - self.start
        size = len(self.buf)
        if used + count > size // 2:  # more than half would be in use: grow
            size = min(max(2 * size, used + count), self.limit)
        grown = np.empty(size, dtype=np.int16) if size != len(self.buf) else self.buf
        grown[:used] = self.buf[self.start : self.end]
        self.buf, self.start, self.end = grown, 0, used
