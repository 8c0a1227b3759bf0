"""livekit's Silero VAD stream, run without a task: the window logic in `push_frame`, the
decisions when the `SileroBatcher` hands back the window's probability.

livekit's stream is a task woken for every pushed frame, which awaits one inference per
32 ms window. Here `push_frame` cuts windows synchronously and queues them; the batcher
infers the first queued window of every stream once per tick and calls `decide` with its
probability, which applies livekit's own rules (same exponential filter, thresholds,
speech buffer and events, in the same order) and sends the events. No task runs per
stream: a frame costs no wake-up, a window one (the consumer of its events).

A flush is a hard boundary, in audio order: windows cut before it are decided first, then
the state resets (livekit-plugins-silero 1.8.9, pinned: `VADStream._main_task`).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_windows import (
    WINDOW,
    PendingSamples,
    Smoothing,
    Window,
)

with vendor_import("livekit-plugins-silero"):
    from livekit import rtc
    from livekit.agents import vad
    from livekit.agents.metrics import VADMetrics
    from livekit.agents.metrics.base import Metadata
    from livekit.agents.utils import aio
    from livekit.plugins.silero.vad import SLOW_INFERENCE_THRESHOLD

if TYPE_CHECKING:
    from livekit.plugins.silero.vad import _VADOptions

    from voicehub.voice.providers.offline.silero_batch import SileroBatcher

__all__ = ["BatchedSileroStream"]

log = logging.getLogger("livekit.plugins.silero")  # livekit's own warnings, as its stream

_FLUSH = None  # in the window queue: the boundary of a flush
_WARN_EVERY = 5.0  # s: at most one "slower than realtime" warning per stream in this time


class BatchedSileroStream(vad.VADStream):
    """One call's Silero stream; inferences go through `batcher` (see the module)."""

    def __init__(self, owner: vad.VAD, opts: _VADOptions, batcher: SileroBatcher) -> None:
        # Not livekit's constructor: it starts the per-frame task and a metrics task.
        self._vad = owner
        self._opts = opts
        self._batcher = batcher
        self.window_size, self.context_size = WINDOW[opts.sample_rate]
        # the model's RNN state and context live in the batcher's banks, at this row
        self.slot = batcher.slot()
        weakref.finalize(self, batcher.release, self.slot)  # freed once nothing holds it
        self._event_ch = aio.Chan[vad.VADEvent]()
        self._event_aiter: Any = self._event_ch  # wrappers may replace it
        self.on_analysed: Callable[[float], None] | None = None  # seconds decided, as they are
        # Whether nobody would act on a quiet window's INFERENCE_DONE now (see `_decide`);
        # None: every window's event is sent, as livekit's stream does.
        self.quiet_unread: Callable[[], bool] | None = None
        self.quiet_skipped = 0  # quiet events not built (for tests and figures)
        # Where events go straight to while none waits in the channel (the reader's own
        # handler, run in the batcher's callback); None: the channel, read by a task.
        self.deliver: Callable[[vad.VADEvent], None] | None = None
        self._queue: deque[Window | None] = deque()
        self.in_flight = False  # the first queued window is in a batch
        self._ended = self._closed = False
        self._error: BaseException | None = None
        self._input_rate = 0
        self._speech_buffer: np.ndarray | None = None
        self._resampler: rtc.AudioResampler | None = None
        self._inference_count, self._inference_total = 0, 0.0
        self._last_activity_time = time.perf_counter()
        self._warned_at = -_WARN_EVERY
        # samples not in a window yet
        self._input, self._model_input = PendingSamples(), PendingSamples()
        self._fract = 0.0  # of an input sample, when the rates' ratio is not whole
        self._reset()

    # -- input ------------------------------------------------------------------------------

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Queue the frame's complete windows for inference (no task is woken)."""
        if self._ended or self._closed or self._event_ch.closed:
            self._check_input_not_ended()
            self._check_not_closed()
        if not self._input_rate:
            self._start(frame.sample_rate)
        elif frame.sample_rate != self._input_rate:
            log.error("a frame with another sample rate was already pushed")
            return
        source = self._input
        source.append(np.frombuffer(frame.data, dtype=np.int16))
        model = source
        if self._resampler is not None:
            model = self._model_input
            for out in self._resampler.push(frame):
                model.append(np.frombuffer(out.data, dtype=np.int16))
        size, ratio = self.window_size, self._input_rate / self._opts.sample_rate
        queued = False
        while model.size >= size:
            to_copy = size * ratio + self._fract
            copied = int(to_copy)
            self._fract = to_copy - copied
            chunk = source.take(copied)
            window = chunk if model is source else model.take(size)
            self._queue.append(Window(window, chunk, time.perf_counter()))
            queued = True
        if queued and not self.in_flight:
            self._next()

    def flush(self) -> None:
        """A hard segment boundary, after the windows already cut."""
        self._check_input_not_ended()
        self._check_not_closed()
        self._queue.append(_FLUSH)
        self._input.clear()
        self._model_input.clear()
        self._fract = 0.0
        if self._input_rate and self._resampler is not None:
            self._resampler = self._new_resampler()
        if not self.in_flight:
            self._next()

    def end_input(self) -> None:
        """No more audio: the events end once the windows already cut are decided."""
        self.flush()
        self._ended = True
        if not self._queue:
            self._end_events()

    async def aclose(self) -> None:
        """Close at once: queued windows are dropped, events end."""
        self._closed = True
        self._queue.clear()
        self._end_events()

    async def __anext__(self) -> vad.VADEvent:
        try:
            event: vad.VADEvent = await self._event_aiter.__anext__()
        except StopAsyncIteration:
            if self._error is not None:
                raise self._error from None
            raise
        return event

    def _check_input_not_ended(self) -> None:
        if self._ended:
            raise RuntimeError(f"{type(self).__name__} input ended")

    def _check_not_closed(self) -> None:
        if self._closed or self._event_ch.closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    async def _main_task(self) -> None:  # livekit's abstract loop: none runs here
        raise NotImplementedError

    # -- the batcher's side -----------------------------------------------------------------

    @property
    def live(self) -> bool:
        """Whether the batcher should still decide this stream's windows."""
        return not self._closed and not self._event_ch.closed

    def window(self) -> np.ndarray:
        """The window to infer now (the first queued): int16 samples at the model's rate,
        to be scaled as livekit's stream does (`INT16_MAX`)."""
        head = self._queue[0]
        assert head is not None
        return head.data

    def decide(self, probability: float) -> None:
        """The first queued window's raw probability: livekit's decisions, then the next
        window (the model's context and state were updated by the batcher)."""
        self.in_flight = False
        if not self.live:
            return
        head = self._queue.popleft()
        assert head is not None
        self._decide(head, probability)
        self._next()

    def fail(self, error: BaseException) -> None:
        """The batch failed: the stream ends with `error`, as livekit's would."""
        self.in_flight = False
        self._error = error
        self._queue.clear()
        self._end_events()

    # -- internals --------------------------------------------------------------------------

    def _next(self) -> None:
        queue = self._queue
        while queue and queue[0] is _FLUSH:
            queue.popleft()
            self._reset()
        if queue:
            self.in_flight = True
            self._batcher.ready(self)
        elif self._ended:
            self._end_events()

    def _end_events(self) -> None:
        self._event_ch.close()
        self._batcher.streams.discard(self)  # a lone call's windows need not wait a tick

    def _start(self, rate: int) -> None:
        self._input_rate = rate
        self._prefix_padding = int(self._opts.prefix_padding_duration * rate)
        size = int(self._opts.max_buffered_speech * rate) + self._prefix_padding
        self._speech_buffer = np.empty(size, dtype=np.int16)
        self._resampler = self._new_resampler()

    def _new_resampler(self) -> rtc.AudioResampler | None:
        if self._input_rate == self._opts.sample_rate:
            return None
        return rtc.AudioResampler(
            input_rate=self._input_rate,
            output_rate=self._opts.sample_rate,
            quality=rtc.AudioResamplerQuality.QUICK,  # as livekit's: VAD needs no more
        )

    def _reset(self) -> None:
        self._batcher.clear(self.slot)
        self._filter = Smoothing(alpha=0.35)
        self._buffer_index = 0
        self._buffer_full = False
        if self._speech_buffer is not None:
            self._speech_buffer.fill(0)
        self._speaking = False
        self._speech_duration = self._silence_duration = 0.0
        self._sample = 0
        self._timestamp = 0.0
        self._speech_run = self._silence_run = 0.0
        self._extra_time = 0.0

    def _decide(self, window: Window, raw: float) -> None:
        opts, buffer = self._opts, self._speech_buffer
        assert buffer is not None
        p = self._filter.apply(raw)
        duration = self.window_size / opts.sample_rate
        self._sample += self.window_size
        self._timestamp += duration
        chunk = window.input
        space = len(buffer) - self._buffer_index
        if (count := min(len(chunk), space)) > 0:
            buffer[self._buffer_index : self._buffer_index + count] = chunk[:count]
            self._buffer_index += count
        elif not self._buffer_full:
            self._buffer_full = True
            log.warning(
                "max_buffered_speech reached, ignoring further data for the current speech input"
            )
        elapsed = time.perf_counter() - window.queued_at
        self._extra_time = max(0.0, self._extra_time + elapsed - duration)
        if elapsed > SLOW_INFERENCE_THRESHOLD and window.queued_at > self._warned_at + _WARN_EVERY:
            # livekit warns at every late window: on an overloaded loop, that is one more
            # write to stderr per window of every call, when it can least afford it
            self._warned_at = window.queued_at
            log.warning("VAD inference is slower than realtime", extra={"delay": self._extra_time})
        if self._speaking:
            self._speech_duration += duration
        else:
            self._silence_duration += duration
        rate = self._input_rate
        if (
            # a quiet window (no speech, none accumulating) whose event its reader says it
            # would ignore: the event, its frame and its wake-up are not made at all
            not self._speaking
            and not self._speech_run
            and not self._speech_duration
            and self.quiet_unread is not None
            and self.quiet_unread()
        ):
            self.quiet_skipped += 1
            self._count_inference(elapsed)
        else:
            self._send_inference(chunk, p, elapsed)
        if self.on_analysed is not None:
            self.on_analysed(len(chunk) / rate)
        self._apply(p, duration)

    def _send_inference(self, chunk: np.ndarray, p: float, elapsed: float) -> None:
        rate = self._input_rate
        data = chunk.tobytes()
        self._send(
            vad.VADEvent(
                type=vad.VADEventType.INFERENCE_DONE,
                samples_index=self._sample,
                timestamp=self._timestamp,
                silence_duration=self._silence_duration,
                speech_duration=self._speech_duration,
                probability=p,
                inference_duration=elapsed,
                frames=[rtc.AudioFrame(data, rate, 1, len(data) // 2)],
                speaking=self._speaking,
                raw_accumulated_silence=self._silence_run,
                raw_accumulated_speech=self._speech_run,
            ),
            elapsed,
        )

    def _apply(self, p: float, duration: float) -> None:
        """livekit's speech/silence rules for one window's filtered probability."""
        opts = self._opts
        if p >= opts.activation_threshold or (self._speaking and p > opts.deactivation_threshold):
            self._speech_run += duration
            self._silence_run = 0.0
            if not self._speaking and self._speech_run >= opts.min_speech_duration:
                self._speaking = True
                self._silence_duration = 0.0
                self._speech_duration = self._speech_run
                self._boundary(vad.VADEventType.START_OF_SPEECH, self._speech_duration)
        else:
            self._silence_run += duration
            self._speech_run = 0.0
            if not self._speaking:
                self._rewind()
            if self._speaking and self._silence_run >= opts.min_silence_duration:
                self._speaking = False
                self._silence_duration = self._silence_run
                speech = max(0.0, self._speech_duration - self._silence_run)
                self._boundary(vad.VADEventType.END_OF_SPEECH, speech)
                self._speech_duration = 0.0
                self._rewind()

    def _boundary(self, kind: vad.VADEventType, speech_duration: float) -> None:
        assert self._speech_buffer is not None
        data = self._speech_buffer[: self._buffer_index].tobytes()
        self._send(
            vad.VADEvent(
                type=kind,
                samples_index=self._sample,
                timestamp=self._timestamp,
                silence_duration=self._silence_duration,
                speech_duration=speech_duration,
                frames=[rtc.AudioFrame(data, self._input_rate, 1, self._buffer_index)],
                speaking=self._speaking,
            )
        )

    def _rewind(self) -> None:
        # keep only the prefix padding: the pre-roll of the next speech
        buffer, padding = self._speech_buffer, self._prefix_padding
        assert buffer is not None
        if self._buffer_index <= padding:
            return
        buffer[:padding] = buffer[self._buffer_index - padding : self._buffer_index]
        self._buffer_full = False
        self._buffer_index = padding

    def _send(self, event: vad.VADEvent, inference_duration: float | None = None) -> None:
        deliver = self.deliver
        if deliver is not None and self._event_ch.empty():
            deliver(event)
        else:
            self._event_ch.send_nowait(event)
        if inference_duration is None:
            self._last_activity_time = time.perf_counter()
        else:
            self._count_inference(inference_duration)

    def _count_inference(self, inference_duration: float) -> None:
        # livekit's metrics task, inline: one report per second of inferences
        self._inference_total += inference_duration
        self._inference_count += 1
        if self._inference_count >= 1 / self._vad.capabilities.update_interval:
            self._vad.emit(
                "metrics_collected",
                VADMetrics(
                    timestamp=time.time(),
                    idle_time=time.perf_counter() - self._last_activity_time,
                    inference_duration_total=self._inference_total,
                    inference_count=self._inference_count,
                    label=self._vad._label,
                    metadata=Metadata(
                        model_name=self._vad.model, model_provider=self._vad.provider
                    ),
                ),
            )
            self._inference_count, self._inference_total = 0, 0.0
