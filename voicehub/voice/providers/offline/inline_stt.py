"""A livekit STT stream that handles each pushed frame in `push_frame` itself, and can hand
its events straight to a callback (`DirectEvents`).

livekit's `RecognizeStream` queues every pushed frame (and flush) in its input channel, and
the stream's own task wakes to take it: a task wake-up per 20 ms frame per call, for
recognizers that only buffer or forward a frame (a few microseconds). Its events go the
same way out: a channel, read by the caller's task and by a metrics task (a `tee`).
:class:`InlineRecognizeStream` overrides the public `push_frame`, `flush` and `end_input`
to hand an item to the subclass's `_take` at once; only an item that cannot be handled now
(the subclass must await something first, or earlier items still wait) is sent to the
input channel, in order, for the stream's task, which hands it to `_take_queued`. Once
`deliver_to(sink)` is called, events go to `sink` instead of the channel, and the usage
events become livekit metrics here (what livekit's metrics task would have done).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np

from voicehub.voice.audio import int16_to_pcm16
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.metrics import STTMetrics
    from livekit.agents.metrics.base import Metadata
    from livekit.agents.types import APIConnectOptions

__all__ = ["InlineRecognizeStream", "InputItem", "mono_pcm16"]

log = logging.getLogger("voicehub.voice")

InputItem: TypeAlias = "rtc.AudioFrame | stt.RecognizeStream._FlushSentinel"

EventSink = Callable[[stt.SpeechEvent], None]


class InlineRecognizeStream(stt.RecognizeStream):
    """A `RecognizeStream` whose input is handled where it is pushed (see the module).

    Subclasses implement `_take` (synchronous: handle the item now, or return False to
    queue it) and may override `_take_queued` (the task's side, which may await). They send
    events with `_emit`. An error raised while handling an item pushed inline ends the
    stream as an error raised in `_run` does: reported by livekit's retry loop, the stream
    closed. With `sample_rate`, pushed frames at other rates are resampled to it (livekit's
    resampler, as the base class would).
    """

    def __init__(
        self,
        *,
        stt: stt.STT[Any],
        conn_options: APIConnectOptions,
        sample_rate: int | None = None,
    ) -> None:
        super().__init__(stt=stt, conn_options=conn_options)
        self._wanted_rate = sample_rate
        self._pushed_rate = 0
        self._resampler: rtc.AudioResampler | None = None
        self._backlog = 0  # items sent to the input channel that the task has not taken
        self._busy = False  # the task is handling a queued item (it may be awaiting)
        self._error: Exception | None = None
        self._sink: EventSink | None = None
        self._closed = False
        self.taken_inline = 0  # items handled in push_frame / flush (figures and tests)
        self.taken_queued = 0  # items handled by the stream's task

    # -- livekit's public input, handled here ----------------------------------------------

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Hand `frame` (resampled if the stream wants another rate) to the recognizer."""
        self._check_open()
        if self._pushed_rate and self._pushed_rate != frame.sample_rate:
            raise ValueError("the sample rate of the input frames must be consistent")
        self._pushed_rate = frame.sample_rate
        wanted = self._wanted_rate
        if wanted is None or wanted == frame.sample_rate:
            self._offer(frame)
            return
        if self._resampler is None:
            self._resampler = rtc.AudioResampler(
                frame.sample_rate, wanted, quality=rtc.AudioResamplerQuality.HIGH
            )
        for resampled in self._resampler.push(frame):
            self._offer(resampled)

    def flush(self) -> None:
        """End the current segment: the recognizer answers with a final."""
        self._check_open()
        if self._resampler is not None:
            for resampled in self._resampler.flush():
                self._offer(resampled)
        self._offer(self._FlushSentinel())

    # -- the engine's abilities (`voicehub.voice.providers.streams.RecognizerAbilities`) ----

    def flush_ended(self, behind: float) -> None:
        """A flush for an utterance the VAD ended `behind` seconds before the latest audio
        pushed: a stream that does not cut its own utterances flushes here."""
        self.flush()

    def speech_started(self) -> None:
        """The VAD heard speech start (a streaming recognizer hears everything anyway)."""

    @property
    def finals_owed(self) -> int:
        """Flushes not answered by a final yet (0: a stream that does not count them)."""
        return 0

    def end_input(self) -> None:
        """No more audio: flush, then let the task finish what is queued."""
        self.flush()
        self._input_ch.close()

    # -- DirectEvents ----------------------------------------------------------------------------

    def deliver_to(self, sink: EventSink) -> None:
        """From now on, hand every event to `sink` (at once, in order) instead of the
        stream's iterator (`voicehub.voice.engine.direct_events.DirectEvents`)."""
        self._sink = sink

    def _emit(self, event: stt.SpeechEvent) -> None:
        """Send one event to the sink, or to the iterator when there is none."""
        if self._closed:
            return  # a late result (a decoding that ran on): nobody listens
        sink = self._sink
        if sink is None:
            if not self._event_ch.closed:  # else: closed while a decoding was running
                self._event_ch.send_nowait(event)
            return
        if event.type == stt.SpeechEventType.RECOGNITION_USAGE:
            self._report_usage(event)
        sink(event)

    def _report_usage(self, event: stt.SpeechEvent) -> None:
        """What livekit's metrics task does with a usage event it reads."""
        usage = event.recognition_usage
        if usage is None:
            return
        recognizer = self._stt
        recognizer.emit(
            "metrics_collected",
            STTMetrics(
                request_id=event.request_id,
                timestamp=time.time(),
                duration=0.0,
                label=recognizer.label,
                audio_duration=usage.audio_duration,
                streamed=True,
                metadata=Metadata(model_name=recognizer.model, model_provider=recognizer.provider),
            ),
        )

    # -- for subclasses ------------------------------------------------------------------------

    def _take(self, item: Any) -> bool:
        """Handle `item` now (True), or leave it to the task, queued in order (False)."""
        raise NotImplementedError

    async def _take_queued(self, item: Any) -> None:
        """Handle an item that was queued (on the stream's task)."""
        if not self._take(item):
            raise RuntimeError(f"{type(self).__name__} could not take a queued item")

    def _queue(self, item: object) -> None:
        """Queue `item` for the task behind whatever is queued (from `_take`: something to
        await before the next item, e.g. a marker of the subclass's own)."""
        self._backlog += 1
        self._input_ch.send_nowait(item)  # type: ignore[arg-type]

    def _fail(self, error: Exception) -> None:
        """End the stream with `error` from its task (from a callback that is not the
        task's: a decoder's answer, for instance)."""
        if self._error is None:
            self._error = error
        if not self._input_ch.closed:
            self._queue(None)  # wakes the task, which raises it

    # -- internals ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close now: nothing more is handled or sent."""
        self._closed = True
        await super().aclose()

    def _check_open(self) -> None:
        if self._input_ch.closed:
            raise RuntimeError(f"{type(self).__module__}.{type(self).__name__} input ended")
        if self._event_ch.closed:
            raise RuntimeError(f"{type(self).__module__}.{type(self).__name__} is closed")

    def _offer(self, item: object) -> None:
        if self._backlog == 0 and not self._busy and self._error is None:
            try:
                if self._take(item):
                    self.taken_inline += 1
                    return
            except Exception as error:  # ends the stream from its task, as livekit's would
                self._error = error
        self._queue(item)

    async def _run(self) -> None:
        async for item in self._input_ch:
            self._backlog -= 1
            if self._error is not None:
                break
            if item is None:
                continue
            self._busy = True
            try:
                await self._take_queued(item)
                self.taken_queued += 1
            finally:
                self._busy = False
        if self._error is not None:
            raise self._error


def mono_pcm16(frame: rtc.AudioFrame) -> bytes:
    """A frame's samples as mono PCM16 bytes (channels averaged)."""
    if frame.num_channels == 1:
        return frame.data.tobytes()
    samples = np.frombuffer(frame.data, dtype=np.int16)
    mixed = samples.reshape(-1, frame.num_channels).astype(np.float32).mean(axis=1)
    return int16_to_pcm16(np.rint(mixed))
