"""The pieces a batched Silero stream cuts its windows with: samples waiting for a window,
a cut window, and livekit's smoothing of the model's probabilities."""

from __future__ import annotations

import numpy as np

__all__ = ["INT16_MAX", "WINDOW", "PendingSamples", "Smoothing", "Window"]

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


class Smoothing:
    """livekit's `ExpFilter(alpha=0.35)` as its Silero stream applies it (exp 1, no
    bounds): the same arithmetic, without the filter's eight `is_given` checks a window."""

    __slots__ = ("_alpha", "value")

    def __init__(self, alpha: float) -> None:
        self._alpha = alpha**1.0
        self.value: float | None = None

    def apply(self, sample: float) -> float:
        a, filtered = self._alpha, self.value
        self.value = sample if filtered is None else a * filtered + (1 - a) * sample
        return self.value


class PendingSamples:
    """Samples not yet in a window: appended per frame, taken per window, copied once."""

    __slots__ = ("buf", "size")

    def __init__(self) -> None:
        self.buf = np.empty(4096, dtype=np.int16)
        self.size = 0

    def append(self, samples: np.ndarray) -> None:
        end = self.size + len(samples)
        if end > len(self.buf):  # a burst pushed faster than windows are cut: grow
            grown = np.empty(max(end, 2 * len(self.buf)), dtype=np.int16)
            grown[: self.size] = self.buf[: self.size]
            self.buf = grown
        self.buf[self.size : end] = samples
        self.size = end

    def take(self, count: int) -> np.ndarray:
        """The first `count` samples (fewer if fewer), removed."""
        count = min(count, self.size)
        taken = self.buf[:count].copy()
        rest = self.size - count
        self.buf[:rest] = self.buf[count : self.size]
        self.size = rest
        return taken

    def clear(self) -> None:
        self.size = 0
