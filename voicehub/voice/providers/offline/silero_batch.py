"""Silero VAD as livekit `vad.VAD`s: per call (`SileroVAD`) or batched across calls
(`BatchedSileroVAD`), both on one `SileroModel` per process.

Each stream (`SileroStream`) decides by livekit's Silero rules with its own model state:
RNN state and 64-sample context, kept in a row of its `SileroBatcher`'s banks. Only the
inference is shared: a stream's next window waits in the batcher for at most `tick`
seconds, then all waiting windows go through the model as one batch, in one thread hop,
and each stream decides on its probability when the batch comes back. Rows of a batch do
not mix (the model is per row), so each stream sees the probabilities it would have seen
alone, up to float rounding of the batched kernels. When every live stream has a window
waiting (a lone call, or a burst) the batch runs at once: waiting for the tick could bring
nothing more. A `SileroVAD` gives each stream a batcher of its own: one window a run.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

import numpy as np

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_model import (
    SILENT_STATE_WINDOWS,
    SileroModel,
    SileroOptions,
)
from voicehub.voice.providers.offline.silero_stream import SileroDetector, SileroStream
from voicehub.voice.providers.offline.silero_windows import INT16_MAX

with vendor_import("livekit-agents"):
    from livekit.agents import vad

__all__ = ["BatchedSileroVAD", "SileroBatcher", "SileroVAD"]

log = logging.getLogger("voicehub.voice")

# Silero decides every 32 ms; livekit's metrics report once per this many inferences
_UPDATE_INTERVAL = 0.032


class SileroBatcher:
    """Collects the next window of many streams and runs them as one batch per `tick`.

    The silence gate runs here, on the whole batch at once: a row whose stream may skip
    (`SileroDetector.gate`, the stream's silent peak while it is out of speech, else -1)
    and whose samples all stay within that peak is decided with the model's silent
    probability, in the next loop step, and left out of the model run. Its stream's context
    follows its audio; its RNN state, when inference resumes, moves towards the model's
    silent state (about e-fold every `SILENT_STATE_WINDOWS` windows skipped).
    """

    def __init__(
        self, model: SileroModel, *, tick: float = 0.02, decide_per_step: int = 48
    ) -> None:
        self.model = model
        self.tick = tick
        self.decide_per_step = decide_per_step  # streams deciding in one loop callback
        self.window_size, self.context_size = model.window_size, model.context_size
        # each stream's model context, RNN state and windows skipped, one row (slot) per
        # stream: a batch gathers and scatters its rows in one call each
        self._contexts = np.zeros((0, self.context_size), dtype=np.float32)
        self._states = np.zeros((2, 0, 128), dtype=np.float32)
        self._skipped = np.zeros(0, dtype=np.int64)
        self._silent_state = model.silent_state[:, None, :]
        self._free: list[int] = []
        self._waiting: list[SileroDetector] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_batch = float("-inf")  # loop time the latest batch started
        self.streams: weakref.WeakSet[SileroDetector] = weakref.WeakSet()  # live ones
        self.batches = 0  # counters, for the bench and tests
        self.windows = 0  # through the model
        self.skipped = 0  # decided silent without it

    def slot(self) -> int:
        """A free row of the banks, zeroed (the banks grow as needed)."""
        if not self._free:
            size = len(self._contexts)
            grown = max(16, 2 * size)
            contexts = np.zeros((grown, self.context_size), dtype=np.float32)
            contexts[:size] = self._contexts
            states = np.zeros((2, grown, 128), dtype=np.float32)
            states[:, :size] = self._states
            skipped = np.zeros(grown, dtype=np.int64)
            skipped[:size] = self._skipped
            self._contexts, self._states, self._skipped = contexts, states, skipped
            self._free = list(range(grown - 1, size - 1, -1))
        slot = self._free.pop()
        self.clear(slot)
        return slot

    def clear(self, slot: int) -> None:
        """A fresh model state for the stream at `slot` (a new stream, or a flush)."""
        self._contexts[slot] = 0
        self._states[:, slot] = 0
        self._skipped[slot] = 0

    def release(self, slot: int) -> None:
        """The stream at `slot` is gone (garbage-collected): its row can be reused."""
        self._free.append(slot)

    def ready(self, stream: SileroDetector) -> None:
        """`stream` has a window to infer (`stream.window`); it gets `decide` or `fail`."""
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
        loop = asyncio.get_running_loop()
        self._last_batch = loop.time()
        count = len(batch)
        # the rows are built here, on the loop: a stream's state changes only on the loop
        slots = np.fromiter((stream.slot for stream in batch), dtype=np.intp, count=count)
        windows = [stream.window for stream in batch]
        samples = np.concatenate(windows).reshape(count, self.window_size)
        gates = np.fromiter((stream.gate for stream in batch), dtype=np.int32, count=count)
        quiet = (samples.max(axis=1) <= gates) & (samples.min(axis=1) >= -gates)
        if quiet.any():
            batch, slots, samples = self._skip(batch, slots, samples, quiet)
            if not batch:
                return
        inputs = np.empty((len(batch), self.context_size + self.window_size), dtype=np.float32)
        inputs[:, : self.context_size] = self._contexts[slots]
        # scaled as livekit's stream scales each window, element by element: one call here
        np.divide(samples, INT16_MAX, out=inputs[:, self.context_size :], dtype=np.float32)
        self._resume(slots)
        state = self._states[:, slots]  # a copy: the batch owns its input
        run = loop.run_in_executor(self.model.executor, self.model.infer, inputs, state)
        run.add_done_callback(lambda done: self._resolve(batch, slots, inputs, done))

    def _skip(
        self,
        batch: list[SileroDetector],
        slots: np.ndarray,
        samples: np.ndarray,
        quiet: np.ndarray,
    ) -> tuple[list[SileroDetector], np.ndarray, np.ndarray]:
        """Decide the quiet rows without the model (next loop step); the others remain."""
        quiet_slots = slots[quiet]
        self._skipped[quiet_slots] += 1
        self._contexts[quiet_slots] = samples[quiet, -self.context_size :] / INT16_MAX
        flags = quiet.tolist()
        silent = self.model.silent_probability
        decisions = [(stream, silent) for stream, flag in zip(batch, flags, strict=True) if flag]
        self.skipped += len(decisions)
        asyncio.get_running_loop().call_soon(self._decide, decisions, 0)
        loud = ~quiet
        return (
            [stream for stream, flag in zip(batch, flags, strict=True) if not flag],
            slots[loud],
            samples[loud],
        )

    def _resume(self, slots: np.ndarray) -> None:
        """Rows that skipped windows since their last run: their state moves towards the
        silent state as much as that many windows of silence would have moved it."""
        skipped = self._skipped[slots]
        if not skipped.any():
            return
        rows = slots[skipped > 0]
        kept = np.exp(-skipped[skipped > 0] / SILENT_STATE_WINDOWS).astype(np.float32)
        silent = self._silent_state
        self._states[:, rows] = silent + (self._states[:, rows] - silent) * kept[None, :, None]
        self._skipped[rows] = 0

    def _resolve(
        self,
        batch: list[SileroDetector],
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

    def _decide(self, decisions: list[tuple[SileroDetector, float]], start: int) -> None:
        # A few dozen streams per loop step: hundreds at once held the loop 5 ms and more;
        # the rest come in the next steps, after whatever else is ready (each stream's own
        # windows keep their order: it is in flight until it decides).
        end = start + self.decide_per_step
        for stream, probability in decisions[start:end]:
            stream.decide(probability)
        if end < len(decisions):
            asyncio.get_running_loop().call_soon(self._decide, decisions, end)


class SileroVAD(vad.VAD):
    """Silero VAD deciding as livekit's plugin, one model run per window per call.

    `model` is shared (load it once per process, about 100 ms; `SileroModel`); each
    `stream()` has its own state. Its streams are `InlineVADStream`s: an `async for`
    consumer reads them as livekit's, and `deliver_to` hands events to a callback.
    """

    def __init__(self, model: SileroModel, options: SileroOptions) -> None:
        if options.sample_rate != model.sample_rate:
            raise ValueError(
                f"options.sample_rate={options.sample_rate} but the model runs at "
                f"{model.sample_rate} Hz"
            )
        super().__init__(capabilities=vad.VADCapabilities(update_interval=_UPDATE_INTERVAL))
        self.silero_model = model
        self.options = options

    @classmethod
    def load(cls, options: SileroOptions | None = None) -> SileroVAD:
        """Load the model (blocking, about 100 ms) and build a VAD on it."""
        options = options or SileroOptions()
        return cls(SileroModel(options.sample_rate), options)

    @property
    def model(self) -> str:
        """Always "silero", as livekit's Silero plugin."""
        return "silero"

    @property
    def provider(self) -> str:
        """Always "ONNX", as livekit's Silero plugin."""
        return "ONNX"

    @property
    def min_silence_duration(self) -> float:
        """Silence that ends speech (livekit's turn detector reads it)."""
        return self.options.min_silence_duration

    def for_call(self) -> SileroVAD:
        """A VAD object for one more call on the same model (and batcher, if batched)."""
        return SileroVAD(self.silero_model, self.options)

    def stream(self) -> SileroStream:
        """A stream with its own model state, inferring one window per model run."""
        return SileroStream(self, self.options, SileroBatcher(self.silero_model))


class BatchedSileroVAD(SileroVAD):
    """Silero VAD with inference batched across the streams of every VAD sharing its
    `batcher` (see the module). Build one per call with `for_call()`.

    `shared`: a `SileroVAD` whose model and options to use. The batcher is per event loop,
    like the streams.
    """

    def __init__(self, shared: SileroVAD, batcher: SileroBatcher | None = None) -> None:
        super().__init__(shared.silero_model, shared.options)
        self.batcher = batcher or SileroBatcher(shared.silero_model)

    def for_call(self) -> BatchedSileroVAD:
        """A VAD object for one more call, on the same model and batcher."""
        return BatchedSileroVAD(self, self.batcher)

    def stream(self) -> SileroStream:
        """A stream deciding as livekit's Silero stream, inferring through the batcher."""
        return SileroStream(self, self.options, self.batcher)
