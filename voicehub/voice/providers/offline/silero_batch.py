"""Silero VAD batched across calls: one ONNX run per tick for every live stream.

livekit's Silero stream runs one inference per 32 ms window per call, each with its own hop
to a worker thread. Here every stream keeps livekit's own logic (thresholds, exp filter,
speech buffer, events) and its own model state (RNN state and 64-sample context); only the
inference moves: a stream's window waits in the `SileroBatcher` for at most `tick` seconds,
then all waiting windows go through the shared ONNX session as one batch, in one thread hop.
Rows of a batch do not mix (the model is per-row), so each stream sees the probabilities it
would have seen alone, up to float rounding of the batched kernels. When every live stream
has a window waiting (a lone call, or a burst) the batch runs at once: waiting for the tick
could bring nothing more.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-plugins-silero"):
    from livekit.plugins import silero

__all__ = ["BatchedSileroVAD", "SileroBatcher", "StreamModel"]

_WINDOW = {16000: (512, 64), 8000: (256, 32)}  # samples per window, context samples


class StreamModel:
    """One stream's Silero state; stands in for livekit's `OnnxModel` in its stream."""

    def __init__(self, batcher: SileroBatcher) -> None:
        self.batcher = batcher
        self.sample_rate = batcher.sample_rate
        self.window_size_samples, self.context_size = _WINDOW[batcher.sample_rate]
        self.context = np.zeros(self.context_size, dtype=np.float32)
        self.state = np.zeros((2, 128), dtype=np.float32)
        batcher.streams.add(self)

    def reset(self) -> None:
        """Forget the audio seen so far (livekit calls this on a flush)."""
        self.context.fill(0)
        self.state.fill(0)


class SileroBatcher:
    """Collects windows from many streams and runs them as one batch per `tick`."""

    def __init__(self, session: Any, sample_rate: int, *, tick: float = 0.02) -> None:
        self.session = session
        self.sample_rate = sample_rate
        self.tick = tick
        self._sr = np.array(sample_rate, dtype=np.int64)
        self._waiting: list[tuple[StreamModel, np.ndarray, asyncio.Future[float]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.streams: weakref.WeakSet[StreamModel] = weakref.WeakSet()  # the live ones
        self.batches = 0  # counters, for the bench
        self.windows = 0

    def submit(self, model: StreamModel, window: np.ndarray) -> asyncio.Future[float]:
        """Queue one window of `model`'s stream; the future gets its speech probability."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # windows and timer of a loop that ended died with it
            self._loop, self._waiting, self._timer = loop, [], None
        future: asyncio.Future[float] = loop.create_future()
        # the stream reuses its window buffer: keep a copy
        self._waiting.append((model, window.copy(), future))
        if len(self._waiting) >= len(self.streams):
            if self._timer is not None:
                self._timer.cancel()
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.tick, self._flush)
        return future

    def _flush(self) -> None:
        self._timer = None
        batch, self._waiting = self._waiting, []
        if batch:
            task = asyncio.get_running_loop().run_in_executor(None, self._infer, batch)
            task.add_done_callback(lambda done: self._resolve(batch, done))

    def _infer(
        self, batch: list[tuple[StreamModel, np.ndarray, asyncio.Future[float]]]
    ) -> np.ndarray:
        """One ONNX run for the batch (on a worker thread); updates each stream's state."""
        context = batch[0][0].context_size
        inputs = np.empty((len(batch), context + batch[0][1].shape[0]), dtype=np.float32)
        state = np.empty((2, len(batch), 128), dtype=np.float32)
        for row, (model, window, _) in enumerate(batch):
            inputs[row, :context] = model.context
            inputs[row, context:] = window
            state[:, row] = model.state
        out, state = self.session.run(None, {"input": inputs, "state": state, "sr": self._sr})
        for row, (model, _, _) in enumerate(batch):
            model.context = inputs[row, -context:].copy()
            model.state = state[:, row].copy()
        self.batches += 1
        self.windows += len(batch)
        return np.asarray(out, dtype=np.float32).reshape(len(batch))

    @staticmethod
    def _resolve(
        batch: list[tuple[StreamModel, np.ndarray, asyncio.Future[float]]],
        done: asyncio.Future[np.ndarray],
    ) -> None:
        if done.cancelled() or done.exception() is not None:
            error = done.exception() if not done.cancelled() else asyncio.CancelledError()
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(error or RuntimeError("VAD batch failed"))
            return
        for (_, _, future), probability in zip(batch, done.result().tolist(), strict=True):
            if not future.done():  # a closed stream's waiter may be gone
                future.set_result(probability)


class _BatchingLoop:
    """The event loop as a batched stream sees it: livekit's Silero stream uses its loop
    only for `run_in_executor(None, model, window)`, which goes to the batcher here."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        if isinstance(func, StreamModel):
            return func.batcher.submit(func, args[0])
        return self._loop.run_in_executor(executor, func, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)


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

    def stream(self) -> silero.VADStream:
        """A livekit Silero stream whose inferences go through the batcher."""
        stream = silero.VADStream(self, self._opts, StreamModel(self.batcher))  # type: ignore[arg-type]
        # the stream's task has not started yet: it will use the batching loop
        stream._loop = _BatchingLoop(stream._loop)  # type: ignore[assignment]
        self._streams.add(stream)
        return stream
