"""A livekit VAD stream that decides in the caller's call stack, with no task per frame.

livekit's `vad.VADStream` queues every pushed frame for a task that decides it, and every
event for the task that reads them. :class:`InlineVADStream` decides in `push_frame`
itself (WebRTC) or in the callback that brings a window's probability (batched Silero), and
hands each event on at once:

- to its async iterator, as livekit documents (START_OF_SPEECH, INFERENCE_DONE per
  analysed window, END_OF_SPEECH with the whole utterance in its frames), so any livekit
  consumer (`stt.StreamAdapter`, `AgentSession`, an `async for`) reads it unchanged;
- or, once `deliver_to(sink)` is called
  (`voicehub.voice.engine.direct_events.DirectEvents`), to `sink`, synchronously, in
  order, and none to the iterator: no task wakes up per event. Its
  `inferences` option says which INFERENCE_DONE events the sink wants; those it does not
  want are not even built (an event and its audio frame cost more than deciding the
  window): "all" (livekit's stream), "speech" (not those of quiet windows: out of speech,
  none accumulating) or "none" (START_OF_SPEECH and END_OF_SPEECH only).

`analysed_seconds` says how much of the pushed audio is decided, so a consumer that takes
no INFERENCE_DONE still knows how far the VAD got. `watch_pause(after, callback)` tells such
a consumer when the caller, still speaking by the VAD's rules, has been silent `after`
seconds (`callback(True)`, once per pause) and when speech came back after such a pause
(`callback(False)`): the engine starts the end-of-turn model on it before the VAD's end of
speech. Either way the iterator ends when the
stream does (after `end_input`, once every window
is decided, or at `aclose`) and raises the error that ended it, if one did. livekit's
metrics (`metrics_collected`, about one a second) are emitted in both modes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import vad
    from livekit.agents.metrics import VADMetrics
    from livekit.agents.metrics.base import Metadata

__all__ = ["InferenceEvents", "InlineVADStream", "PauseCallback", "VADEventSink"]

log = logging.getLogger("voicehub.voice")

VADEventSink = Callable[[vad.VADEvent], None]
InferenceEvents = Literal["all", "speech", "none"]
PauseCallback = Callable[[bool], None]


class InlineVADStream(vad.VADStream):
    """Base of our VAD streams (see the module): subclasses implement `process_frame`,
    `process_flush` and `process_end`, and call `send` and `finish`."""

    def __init__(self, owner: vad.VAD) -> None:
        self.owner = owner
        self.sink: VADEventSink | None = None
        # which INFERENCE_DONE events to build: those of speech windows, of quiet ones
        # (the iterator gets them all; a sink says, see `deliver_to`)
        self.speech_inferences = self.quiet_inferences = True
        self.input_ended = False
        self.closed = False
        # resolved when the events end: livekit's task (`_main_task`) waits on it
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.input_rate = 0  # of the frames pushed (known at the first)
        self.analysed_samples = 0  # input samples decided, or dropped by a flush
        self.inferences = 0  # since the last metrics report
        self.report_every = 1 / owner.capabilities.update_interval  # as livekit's task
        self.inference_time = 0.0
        self.last_activity = time.perf_counter()
        self.metrics_label = f"{type(owner).__module__}.{type(owner).__name__}"
        self._pause_after = 0.0  # `watch_pause`: the silence that makes a pause
        self._pause_callback: PauseCallback | None = None
        self._paused = False  # a pause of the current speech was reported
        super().__init__(owner)

    # -- livekit's stream interface -----------------------------------------------------------

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Analyse `frame` now (its events go out as soon as they are decided)."""
        if self.input_ended or self.closed or self.finished.done():
            self.check_open()
        self.process_frame(frame)

    def flush(self) -> None:
        """A hard segment boundary: the next frame starts fresh (after those pushed)."""
        self.check_open()
        self.process_flush()

    def end_input(self) -> None:
        """No more audio: the events end once what was pushed is decided."""
        self.flush()
        self.input_ended = True
        self.process_end()

    async def aclose(self) -> None:
        """Close at once: undecided audio is dropped, the events end."""
        self.closed = True
        self.finish()
        await super().aclose()

    def deliver_to(self, sink: VADEventSink, *, inferences: InferenceEvents = "all") -> None:
        """From now on, hand every event to `sink` (synchronously, on the event loop) and
        none to the iterator (`voicehub.voice.engine.direct_events.DirectEvents`). Call it
        before pushing audio: events already waiting for the iterator stay there.

        `inferences`: which INFERENCE_DONE events `sink` gets; the others are not built.
        "all": one per analysed window, as livekit's stream. "speech": not those of quiet
        windows (not speaking, no speech accumulating, none in the segment). "none": only
        START_OF_SPEECH and END_OF_SPEECH (with its speech frames). A consumer that reads
        speech boundaries only (and keeps its own per-frame evidence) passes "none", and
        reads how far the VAD got in `analysed_seconds`.

        A sink that raises is logged; the stream goes on. The iterator still ends when the
        stream does (raising the error that ended it, if one did): iterate it to learn that.
        """
        if inferences not in ("all", "speech", "none"):
            raise ValueError(f"inferences={inferences!r}: expected 'all', 'speech' or 'none'")
        self.sink = sink
        self.speech_inferences = inferences != "none"
        self.quiet_inferences = inferences == "all"

    def watch_pause(self, after: float, callback: PauseCallback) -> None:
        """From now on, call `callback(True)` when the caller has been silent `after`
        seconds while the VAD still holds them speaking (once per pause: before its end of
        speech when `after` is shorter than the VAD's silence), and `callback(False)` when
        speech comes back after a pause reported (then the VAD goes on with the same
        speech). Synchronously, on the event loop, as the events."""
        if not (isinstance(after, int | float) and after > 0):
            raise ValueError(
                f"watch_pause: after must be a positive number of seconds, got {after!r}"
            )
        self._pause_after, self._pause_callback = float(after), callback

    def silence_run(self, speaking: bool, silence: float) -> None:
        """For subclasses, after each decision: whether the VAD holds the caller speaking
        now, and the current run of silence in seconds (0 while speech is heard)."""
        callback = self._pause_callback
        if callback is None:
            return
        paused = speaking and silence >= self._pause_after
        if paused == self._paused or (not paused and silence > 0):
            return  # no news; or the pause went on into the VAD's end of speech
        self._paused = paused
        try:
            callback(paused)
        except Exception:
            log.exception("a VAD pause callback failed")

    @property
    def analysed_seconds(self) -> float:
        """Seconds of the audio pushed that are decided (a flush counts what it dropped):
        how far the events have got, for a consumer that takes no INFERENCE_DONE. Audio
        short of a whole window (32 ms for Silero) waits for the next frame."""
        return self.analysed_samples / self.input_rate if self.input_rate else 0.0

    async def _main_task(self) -> None:
        # livekit's per-stream task: here it only waits for the end (its return closes the
        # event channel; an exception ends the iterator with it)
        await self.finished

    # -- for subclasses -------------------------------------------------------------------------

    def process_frame(self, frame: rtc.AudioFrame) -> None:
        """Analyse one pushed frame."""
        raise NotImplementedError

    def process_flush(self) -> None:
        """A flush, in audio order after the frames already pushed."""
        raise NotImplementedError

    def process_end(self) -> None:
        """The input ended: `finish()` once every pushed frame is decided."""
        raise NotImplementedError

    def check_open(self) -> None:
        """Raise as livekit's stream does on input after the end or after closing."""
        if self.input_ended:
            raise RuntimeError(f"{type(self).__module__}.{type(self).__name__} input ended")
        if self.closed or self.finished.done():
            raise RuntimeError(f"{type(self).__module__}.{type(self).__name__} is closed")

    def send(self, event: vad.VADEvent) -> None:
        """Hand `event` on (to the sink, or to the iterator)."""
        sink = self.sink
        if sink is None:
            self._event_ch.send_nowait(event)  # livekit's metrics task counts it there
            return
        try:
            sink(event)
        except Exception:
            log.exception("a VAD event sink failed on %s", event.type.value)
        if event.type is not vad.VADEventType.INFERENCE_DONE:
            self.last_activity = time.perf_counter()

    def count_inference(self, duration: float) -> None:
        """One window analysed, delivered to the sink or not built: livekit's metrics,
        about one report a second (the iterator's events are counted by livekit's task)."""
        if self.sink is None:
            return
        self.inference_time += duration
        self.inferences += 1
        if self.inferences >= self.report_every:
            self.report_inferences()

    def report_inferences(self) -> None:
        """Emit livekit's metrics for the inferences counted, as its metrics task does."""
        self.owner.emit(
            "metrics_collected",
            VADMetrics(
                timestamp=time.time(),
                idle_time=time.perf_counter() - self.last_activity,
                inference_duration_total=self.inference_time,
                inference_count=self.inferences,
                label=self.metrics_label,
                metadata=Metadata(model_name=self.owner.model, model_provider=self.owner.provider),
            ),
        )
        self.inferences, self.inference_time = 0, 0.0

    def finish(self, error: BaseException | None = None) -> None:
        """End the events (with `error`: the iterator raises it)."""
        if self.finished.done():
            return
        if error is None:
            self.finished.set_result(None)
        else:
            self.finished.set_exception(error)
