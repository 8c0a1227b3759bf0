"""Silero VAD batched across calls: one ONNX run per tick for every live stream.

livekit's Silero stream runs one inference per 32 ms window per call, each with its own hop
to a worker thread, in a task woken for every frame. Here each call's stream is a
`BatchedSileroStream` (livekit's decision logic, run synchronously, with its own model
state: RNN state and 64-sample context, kept in a row of the batcher's banks); only the
inference is shared: a stream's next
window waits in the `SileroBatcher` for at most `tick` seconds, then all waiting windows go
through the shared ONNX session as one batch, in one thread hop, and each stream decides on
its probability when the batch comes back. Rows of a batch do not mix (the model is
per-row), so each stream sees the probabilities it would have seen alone, up to float
rounding of the batched kernels. When every live stream has a window waiting (a lone call,
or a burst) the batch runs at once: waiting for the tick could bring nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_stream import BatchedSileroStream
from voicehub.voice.providers.offline.silero_windows import INT16_MAX, WINDOW

with vendor_import("livekit-plugins-silero"):
    from livekit.plugins import silero

__all__ = ["BatchedSileroStream", "BatchedSileroVAD", "SileroBatcher"]

log = logging.getLogger("voicehub.voice")


class SileroBatcher:
    """Collects the next window of many streams and runs them as one batch per `tick`."""

    def __init__(
        self, session: Any, sample_rate: int, *, tick: float = 0.02, decide_per_step: int = 48
    ) -> None:
        self.session = session
        self.sample_rate = sample_rate
        self.tick = tick
        self.decide_per_step = decide_per_step  # streams deciding in one loop callback
        self._sr = np.array(sample_rate, dtype=np.int64)
        self.window_size, self.context_size = WINDOW[sample_rate]
        # each stream's model context and RNN state, one row (slot) per stream: a batch
        # gathers and scatters its rows in one call each, not three per stream
        self._contexts = np.zeros((0, self.context_size), dtype=np.float32)
        self._states = np.zeros((2, 0, 128), dtype=np.float32)
        self._free: list[int] = []
        self._waiting: list[BatchedSileroStream] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_batch = float("-inf")  # loop time the latest batch started
        self.streams: weakref.WeakSet[BatchedSileroStream] = weakref.WeakSet()  # live ones
        # its own threads: a batch never queues behind the loop's other blocking calls
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="silero-batch")
        self.batches = 0  # counters, for the bench
        self.windows = 0

    def slot(self) -> int:
        """A free row of the banks, zeroed (the banks grow as needed)."""
        if not self._free:
            size = len(self._contexts)
            grown = max(16, 2 * size)
            contexts = np.zeros((grown, self.context_size), dtype=np.float32)
            contexts[:size] = self._contexts
            states = np.zeros((2, grown, 128), dtype=np.float32)
            states[:, :size] = self._states
            self._contexts, self._states = contexts, states
            self._free = list(range(grown - 1, size - 1, -1))
        slot = self._free.pop()
        self.clear(slot)
        return slot

    def clear(self, slot: int) -> None:
        """A fresh model state for the stream at `slot` (a new stream, or a flush)."""
        self._contexts[slot] = 0
        self._states[:, slot] = 0

    def release(self, slot: int) -> None:
        """The stream at `slot` is gone (garbage-collected): its row can be reused."""
        self._free.append(slot)

    def ready(self, stream: BatchedSileroStream) -> None:
        """`stream` has a window to infer (`stream.window()`); it gets `decide` or `fail`."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # windows and timer of a loop that ended died with it
            self._loop, self._waiting, self._timer = loop, [], None
            self._last_batch = float("-inf")
        self._waiting.append(stream)
        if len(self._waiting) >= len(self.streams):
            if self._timer is not None:
                self._timer.cancel()
            self._flush()
        elif self._timer is None:
            # Ticks count from the latest batch's start, not from this window: counted from
            # here (right after a batch came back), a batch that takes half a tick would make
            # the cycle a tick and a half, longer than a window (32 ms) at a few hundred
            # calls, and every stream's windows would pile up, a window a cycle.
            self._timer = loop.call_at(self._last_batch + self.tick, self._flush)

    def _flush(self) -> None:
        self._timer = None
        batch = [stream for stream in self._waiting if stream.live]
        self._waiting = []
        if not batch:
            return
        self._last_batch = asyncio.get_running_loop().time()
        # the rows are built here, on the loop: a stream's state changes only on the loop
        context = self.context_size
        slots = np.fromiter((stream.slot for stream in batch), dtype=np.intp, count=len(batch))
        inputs = np.empty((len(batch), context + self.window_size), dtype=np.float32)
        inputs[:, :context] = self._contexts[slots]
        samples = np.empty((len(batch), self.window_size), dtype=np.int16)
        for row, stream in enumerate(batch):
            samples[row] = stream.window()
        # scaled as livekit's stream scales each window, element by element: one call here
        np.divide(samples, INT16_MAX, out=inputs[:, context:], dtype=np.float32)
        state = self._states[:, slots]  # a copy: the batch owns its input
        run = asyncio.get_running_loop().run_in_executor(self._executor, self._infer, inputs, state)
        run.add_done_callback(lambda done: self._resolve(batch, slots, inputs, done))

    def _infer(self, inputs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One ONNX run for the batch (on a worker thread)."""
        out, state = self.session.run(None, {"input": inputs, "state": state, "sr": self._sr})
        return np.asarray(out, dtype=np.float32).reshape(len(inputs)), state

    def _resolve(
        self,
        batch: list[BatchedSileroStream],
        slots: np.ndarray,
        inputs: np.ndarray,
        done: asyncio.Future[tuple[np.ndarray, np.ndarray]],
    ) -> None:
        if done.cancelled() or done.exception() is not None:
            error = done.exception() if not done.cancelled() else asyncio.CancelledError()
            log.error("Silero batch of %d windows failed: %r", len(batch), error)
            for stream in batch:
                stream.fail(error or RuntimeError("VAD batch failed"))
            return
        self.batches += 1
        self.windows += len(batch)
        probabilities, state = done.result()
        # each stream's next context and state, before any decides (a decision may start
        # the next batch at once); a stream closed meanwhile keeps nothing
        live = np.fromiter((stream.live for stream in batch), dtype=bool, count=len(batch))
        if not live.all():
            slots, inputs, state = slots[live], inputs[live], state[:, live]
        self._contexts[slots] = inputs[:, -self.context_size :]
        self._states[:, slots] = state
        self._decide(list(zip(batch, probabilities.tolist(), strict=True)), 0)

    def _decide(self, decisions: list[tuple[BatchedSileroStream, float]], start: int) -> None:
        # A few dozen streams per loop step: hundreds at once held the loop 5 ms and more
        # (the largest share of its lag at 250 calls); the rest come in the next steps, after
        # whatever else is ready (each stream's own windows keep their order: it is in
        # flight until it decides).
        end = start + self.decide_per_step
        for stream, probability in decisions[start:end]:
            stream.decide(probability)
        if end < len(decisions):
            asyncio.get_running_loop().call_soon(self._decide, decisions, end)


class BatchedSileroVAD(silero.VAD):
    """livekit's Silero VAD with inference batched across streams (see the module).

    Build one per call with `for_call()` (each call's session subscribes to its own VAD's
    metrics) sharing one batcher; the batcher is per event loop, like the streams.
    """

    def __init__(self, shared: silero.VAD, batcher: SileroBatcher | None = None) -> None:
        # livekit-plugins-silero (pinned) has no public accessor for the session and options
        super().__init__(session=shared._onnx_session, opts=shared._opts)
        self.batcher = batcher or SileroBatcher(shared._onnx_session, shared._opts.sample_rate)

    def for_call(self) -> BatchedSileroVAD:
        """A VAD object for one more call, on the same model and batcher."""
        return BatchedSileroVAD(self, self.batcher)

    def stream(self) -> BatchedSileroStream:  # type: ignore[override]
        """A stream deciding as livekit's Silero stream, inferring through the batcher."""
        stream = BatchedSileroStream(self, self._opts, self.batcher)
        self.batcher.streams.add(stream)  # until its events end
        return stream
