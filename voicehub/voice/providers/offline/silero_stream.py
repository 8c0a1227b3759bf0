"""One call's Silero VAD stream: windows cut as frames are pushed, decided as their
probabilities come back from the `SileroBatcher`, by livekit's Silero rules.

The rules are those of livekit-plugins-silero's stream (same smoothing, thresholds,
durations, speech buffer and events, in the same order), run without its task: `push_frame`
cuts 32 ms windows and queues them, the batcher infers the first queued window of every
stream in one model run, and `decide` applies the rules to the window's probability.

A window that is plainly silent (`SileroOptions.silent_peak_dbfs`) while the stream is not
in speech and none is accumulating is decided with the model's silent probability without
a model run (the batcher's silence gate). A flush is a hard boundary in audio order:
windows cut before it are decided first, then the state resets.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.silero_windows import (
    PendingSamples,
    SpeechBuffer,
    Window,
)
from voicehub.voice.providers.offline.vad_stream import InlineVADStream

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import vad

if TYPE_CHECKING:
    from voicehub.voice.providers.offline.silero_batch import SileroBatcher
    from voicehub.voice.providers.offline.silero_model import SileroOptions

__all__ = ["SileroDetector", "SileroStream"]

log = logging.getLogger("voicehub.voice")

_NO_WINDOW = np.zeros(0, dtype=np.int16)
SLOW_INFERENCE = 0.2  # s: a window decided this late is "slower than realtime" (livekit's)
_WARN_EVERY = 5.0  # s: at most one such warning per stream in this time
_BUFFER_START_S = 4  # s of speech the speech buffer holds before it grows
_KEEP = 0.35**1.0  # livekit's smoothing: ExpFilter(alpha=0.35), applied with exp=1.0


class SileroStream(InlineVADStream):
    """A livekit VAD stream on Silero whose inferences go through `batcher` (see the
    module and `InlineVADStream`)."""

    def __init__(self, owner: vad.VAD, options: SileroOptions, batcher: SileroBatcher) -> None:
        super().__init__(owner)
        self.detector = SileroDetector(self, options, batcher)

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Cut the frame's complete windows and queue them (no task is woken)."""
        if self.input_ended or self.closed or self.finished.done():
            self.check_open()
        self.detector.push(frame)

    def process_frame(self, frame: rtc.AudioFrame) -> None:
        """Cut the frame's complete windows and queue them."""
        self.detector.push(frame)

    def process_flush(self) -> None:
        """Queue the boundary after the windows already cut."""
        self.detector.flush()

    def process_end(self) -> None:
        """End once the queued windows are decided."""
        self.detector.end()

    async def aclose(self) -> None:
        """Close at once: queued windows are dropped."""
        self.detector.drop()
        await super().aclose()


class SileroDetector:
    """The windows and decisions of one `SileroStream`: what the batcher deals with."""

    def __init__(
        self, stream: SileroStream, options: SileroOptions, batcher: SileroBatcher
    ) -> None:
        self.stream = stream
        self.options = options
        self.batcher = batcher
        model = batcher.model
        self.window_size = model.window_size
        self.window_duration = model.window_size / model.sample_rate
        self.silent_peak = options.silent_peak
        # the model's RNN state and context live in the batcher's banks, at this row
        self.slot = batcher.slot()
        weakref.finalize(self, batcher.release, self.slot)  # freed once nothing holds it
        batcher.streams.add(self)  # until its events end
        self.live = True  # whether the batcher should still decide this stream's windows
        self.in_flight = False  # the first queued window is in a batch
        self.gate = -1  # the peak under which the window in flight is silent (-1: none is)
        self.window = _NO_WINDOW  # the window in flight: int16 samples at the model's rate
        # windows to decide, in audio order, and flushes: the input samples each dropped
        self._queue: deque[Window | int] = deque()
        self._ended = False
        self._input_rate = 0
        self._ratio = 1.0
        self._speech = SpeechBuffer(0, 0)  # sized at the first frame (the input rate)
        self._prefix_padding = 0
        self._resampler: rtc.AudioResampler | None = None
        self._warned_at = -_WARN_EVERY
        # samples not in a window yet (the input's, and the model rate's when resampled)
        self._input, self._model_input = PendingSamples(), PendingSamples()
        self._fract = 0.0  # of an input sample, when the rates' ratio is not whole
        self._reset()

    # -- input ------------------------------------------------------------------------------

    def push(self, frame: rtc.AudioFrame) -> None:
        """Queue the frame's complete windows for inference."""
        rate = frame.sample_rate
        if rate != self._input_rate:
            if self._input_rate:
                log.error("a frame with another sample rate was already pushed")
                return
            self._start(rate)
        source = self._input
        source.buf += frame.data
        size = self.window_size
        if self._resampler is None:
            if len(source.buf) < 2 * size:
                return
            now = time.perf_counter()
            while len(source.buf) >= 2 * size:
                window = source.take(size)
                self._queue.append(Window(window, window, now))
        else:
            model = self._model_input
            for out in self._resampler.push(frame):
                model.buf += out.data
            if model.size < size:
                return
            now = time.perf_counter()
            while model.size >= size:
                to_copy = size * self._ratio + self._fract
                copied = int(to_copy)
                self._fract = to_copy - copied
                self._queue.append(Window(model.take(size), source.take(copied), now))
        if not self.in_flight:
            self._next()

    def flush(self) -> None:
        """A hard segment boundary, after the windows already cut."""
        self._queue.append(self._input.size)  # dropped: nothing will decide them
        self._input.clear()
        self._model_input.clear()
        self._fract = 0.0
        if self._input_rate:
            self._resampler = self._new_resampler()
        if not self.in_flight:
            self._next()

    def end(self) -> None:
        """The input ended: the events end once the queued windows are decided."""
        self._ended = True
        if not self._queue and not self.in_flight:
            self._finish()

    def drop(self) -> None:
        """The stream closed: queued windows are dropped."""
        self._queue.clear()
        self._finish()

    # -- the batcher's side -----------------------------------------------------------------

    def decide(self, probability: float) -> None:
        """The first queued window's raw probability: livekit's decisions, then the next
        window (the batcher updated the model's context and state)."""
        self.in_flight = False
        if not self.live:
            return
        head = self._queue.popleft()
        assert isinstance(head, Window)
        self._decide(head, probability)
        self._next()

    def fail(self, error: BaseException) -> None:
        """The batch failed: the stream ends with `error`, as livekit's would."""
        self.in_flight = False
        self._queue.clear()
        self._finish(error)

    # -- internals --------------------------------------------------------------------------

    def _next(self) -> None:
        queue = self._queue
        while queue and not isinstance(dropped := queue[0], Window):
            queue.popleft()  # a flush, in audio order
            self.stream.analysed_samples += dropped
            self._reset()
        if queue:
            head = queue[0]
            assert isinstance(head, Window)
            self.window = head.data
            # out of speech, with none accumulating, a plainly silent window may skip the model
            self.gate = -1 if self._speaking or self._speech_run else self.silent_peak
            self.in_flight = True
            self.batcher.ready(self)
        elif self._ended:
            self._finish()

    def _finish(self, error: BaseException | None = None) -> None:
        self.live = False
        self.batcher.streams.discard(self)  # a lone call's windows need not wait a tick
        self.stream.finish(error)

    def _start(self, rate: int) -> None:
        options = self.options
        self._input_rate = self.stream.input_rate = rate
        self._ratio = rate / options.sample_rate
        self._prefix_padding = int(options.prefix_padding_duration * rate)
        # livekit allocates the whole limit (60 s: 1.9 MB a call at 16 kHz); most
        # utterances fit in a few seconds, so the buffer starts there and doubles
        limit = int(options.max_buffered_speech * rate) + self._prefix_padding
        self._speech = SpeechBuffer(limit, self._prefix_padding + _BUFFER_START_S * rate)
        self._resampler = self._new_resampler()

    def _new_resampler(self) -> rtc.AudioResampler | None:
        if self._input_rate == self.options.sample_rate:
            return None
        return rtc.AudioResampler(
            input_rate=self._input_rate,
            output_rate=self.options.sample_rate,
            quality=rtc.AudioResamplerQuality.QUICK,  # as livekit's: VAD needs no more
        )

    def _reset(self) -> None:
        self.batcher.clear(self.slot)
        self._filtered: float | None = None  # livekit's ExpFilter(alpha=0.35) value
        self._speech.clear()
        self._speaking = False
        self._speech_duration = self._silence_duration = 0.0
        self._sample = 0
        self._timestamp = 0.0
        self._speech_run = self._silence_run = 0.0
        self._extra_time = 0.0

    def _decide(self, window: Window, raw: float) -> None:
        """livekit's Silero rules for one window's raw probability, in livekit's order."""
        # livekit's ExpFilter(alpha=0.35) with exp=1: the same arithmetic, inline
        prev = self._filtered
        p = self._filtered = raw if prev is None else _KEEP * prev + (1 - _KEEP) * raw
        duration = self.window_duration
        self._sample += self.window_size
        self._timestamp += duration
        chunk, speech, stream = window.input, self._speech, self.stream
        stream.analysed_samples += len(chunk)
        if not speech.append(chunk) and not speech.full:
            speech.full = True
            log.warning(
                "max_buffered_speech reached, ignoring further data for the current speech input"
            )
        elapsed = time.perf_counter() - window.queued_at
        extra = self._extra_time + elapsed - duration
        self._extra_time = extra if extra > 0.0 else 0.0
        if elapsed > SLOW_INFERENCE and window.queued_at > self._warned_at + _WARN_EVERY:
            # livekit warns at every late window: on an overloaded loop, that is one more
            # write to stderr per window of every call, when it can least afford it
            self._warned_at = window.queued_at
            log.warning("VAD inference is slower than realtime", extra={"delay": self._extra_time})
        speaking = self._speaking
        if speaking:
            self._speech_duration += duration
        else:
            self._silence_duration += duration
        if stream.speech_inferences and (
            stream.quiet_inferences or speaking or self._speech_run or self._speech_duration
        ):
            stream.send(
                vad.VADEvent(
                    type=vad.VADEventType.INFERENCE_DONE,
                    samples_index=self._sample,
                    timestamp=self._timestamp,
                    silence_duration=self._silence_duration,
                    speech_duration=self._speech_duration,
                    probability=p,
                    inference_duration=elapsed,
                    frames=[_frame(chunk, self._input_rate)],
                    speaking=speaking,
                    raw_accumulated_silence=self._silence_run,
                    raw_accumulated_speech=self._speech_run,
                )
            )
        if stream.sink is not None:  # the iterator's events are counted by livekit's task
            stream.inference_time += elapsed
            stream.inferences += 1
            if stream.inferences >= stream.report_every:
                stream.report_inferences()
        options = self.options
        if p >= options.activation_threshold or (speaking and p > options.deactivation):
            self._speech_run += duration
            self._silence_run = 0.0
            if not speaking and self._speech_run >= options.min_speech_duration:
                self._speaking = True
                self._silence_duration = 0.0
                self._speech_duration = self._speech_run
                self._boundary(vad.VADEventType.START_OF_SPEECH, self._speech_duration)
            stream.silence_run(self._speaking, 0.0)
            return
        self._silence_run += duration
        self._speech_run = 0.0
        if speaking:
            stream.silence_run(True, self._silence_run)
        if not speaking:
            speech.keep_last(self._prefix_padding)  # the pre-roll of the next speech
        elif self._silence_run >= options.min_silence_duration:
            self._speaking = False
            self._silence_duration = self._silence_run
            ended = self._speech_duration - self._silence_run
            self._boundary(vad.VADEventType.END_OF_SPEECH, ended if ended > 0.0 else 0.0)
            self._speech_duration = 0.0
            speech.keep_last(self._prefix_padding)

    def _boundary(self, kind: vad.VADEventType, speech_duration: float) -> None:
        self.stream.send(
            vad.VADEvent(
                type=kind,
                samples_index=self._sample,
                timestamp=self._timestamp,
                silence_duration=self._silence_duration,
                speech_duration=speech_duration,
                frames=[_frame(self._speech.audio(), self._input_rate)],
                speaking=self._speaking,
            )
        )


def _frame(samples: np.ndarray, rate: int) -> rtc.AudioFrame:
    data = samples.tobytes()
    return rtc.AudioFrame(data, rate, 1, len(data) // 2)
