"""Caller frames straight into a livekit session's VAD and STT streams.

livekit's `AgentSession` hands each caller frame through three queue hops, each a task
woken per frame: its audio forwarding task (voicehub calls the activity's `push_audio`
directly instead, see `LiveKitVoiceSession`), then, inside `AudioRecognition`, one channel
to a task that pushes the frame into the VAD stream and one to a task that pushes it into
the STT stream. :class:`DirectFeed` replaces those two channels with :class:`DirectChan`s,
which push into the stream from `send_nowait` itself whenever nothing waits in them, so a
frame reaches both streams in the caller's own call stack; anything that must wait (no
stream yet, an STT stream being re-created) queues as before, in order, and is read by
livekit's own task. Flushes travel the same way, so they stay in audio order.

livekit-agents (pinned, 1.8.9) has no public hook for this: the channels are
`AudioRecognition._vad_ch` and `_STTPipeline._audio_ch`, the streams `_vad_stream` and
`_recognize_stream`; a livekit that renames them leaves the frames on livekit's path
(`DirectFeed.wired` says which).

The other way, a batched Silero stream (`BatchedSileroStream`) decides its windows in the
batcher's callback; its events then go straight into livekit's handler
(`vad_events_to`: `AudioRecognition._on_vad_event`, a coroutine that awaits nothing, run
to its end) instead of waking livekit's VAD task for each. And it is told when its quiet
windows' INFERENCE_DONE events would be ignored (`quiet_events_unread`), so it does not
build them: most windows of a call are quiet, and each event costs a frame and a handler
run for nothing. Both are wired for livekit-agents 1.8.9 only (`QUIET_EVENTS_LIVEKIT`);
on another version the events travel livekit's own way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import __version__ as livekit_version
    from livekit.agents import stt, vad
    from livekit.agents.utils import aio

__all__ = ["DirectChan", "DirectFeed", "quiet_events_unread", "vad_events_to"]

log = logging.getLogger("voicehub.voice")

_LOOK_AGAIN = 25  # frames (0.5 s) between looks at channels already replaced

# what `quiet_events_unread` and `vad_events_to` know of livekit's VAD event handling is
# this version's
QUIET_EVENTS_LIVEKIT = "1.8.9"

T = TypeVar("T")


class DirectChan(aio.Chan[T], Generic[T]):
    """A channel whose items go to `push` while nothing is queued in it (`push` returns
    False when it cannot take one now); otherwise they queue, in order, for its reader."""

    def __init__(self, push: Callable[[T], bool]) -> None:
        super().__init__()
        self._push = push
        self.direct = 0  # items pushed straight through (for tests and figures)
        self.queued = 0  # items left to livekit's reading task

    def send_nowait(self, value: T) -> None:
        if self.empty() and self._push(value):
            self.direct += 1
            return
        self.enqueue(value)

    def enqueue(self, value: T) -> None:
        """Queue `value` for the reader, behind anything queued (never pushed)."""
        super().send_nowait(value)
        self.queued += 1


class DirectFeed:
    """Wires one call's livekit session for direct frames; `push` hands one frame over."""

    def __init__(self, session: Any) -> None:
        self._session = session  # livekit's AgentSession
        self.wired = {"vad": 0, "stt": 0}  # times each channel was replaced
        self.frames = 0  # frames handed to livekit's activity
        # `frames` when each channel was last replaced: the frames before it took
        # livekit's own hop (tests check every later one went through the new channel)
        self.wired_at = {"vad": 0, "stt": 0}
        # the recognition last looked at, and the frame count at which to look again
        self._recognition: Any = None
        self._look_at = 0

    def push(self, frame: rtc.AudioFrame) -> None:
        """What livekit's audio forwarding task does with a frame, minus the wake-up."""
        activity = self._session._activity
        if activity is None:
            return
        recognition = activity._audio_recognition
        if recognition is not None and (
            recognition is not self._recognition or self.frames >= self._look_at
        ):
            self._wire(activity, recognition)
        activity.push_audio(frame)
        self.frames += 1

    def _wire(self, activity: Any, recognition: Any) -> None:
        # A new activity (handoff) or a new VAD brings new plain channels: replace each
        # once its stream exists and nothing waits in it (livekit's task has it all).
        # Once both are replaced, look again only now and then (a new VAD or STT stream
        # brings a new plain channel; its frames take livekit's hop until then).
        pipeline: Any = getattr(recognition, "_stt_pipeline", None)
        self._recognition = recognition
        wired = 0
        for name, owner, channel_attr, stream_attr, push in (
            ("vad", recognition, "_vad_ch", "_vad_stream", _vad_push),
            ("stt", pipeline, "_audio_ch", "_recognize_stream", _stt_push),
        ):
            channel = getattr(owner, channel_attr, None)
            if type(channel) is DirectChan:
                wired += 1
            elif (
                type(channel) is aio.Chan
                and channel.empty()
                and getattr(owner, stream_attr, None) is not None
            ):
                setattr(owner, channel_attr, DirectChan(push(owner)))
                self.wired[name] += 1
                self.wired_at[name] = self.frames
                if name == "vad" and livekit_version == QUIET_EVENTS_LIVEKIT:
                    stream = recognition._vad_stream
                    if hasattr(stream, "quiet_unread"):  # batched Silero's
                        stream.quiet_unread = quiet_events_unread(activity, recognition)
                        stream.deliver = vad_events_to(recognition)
        self._look_at = self.frames + (_LOOK_AGAIN if wired == 2 else 1)


def _vad_push(recognition: Any) -> Callable[[rtc.AudioFrame], bool]:
    def push(frame: rtc.AudioFrame) -> bool:
        stream = recognition._vad_stream
        if stream is None:
            return False
        try:
            stream.push_frame(frame)
        except RuntimeError:  # closing: livekit's task would have stopped reading too
            log.debug("caller frame after the VAD stream ended")
        return True

    return push


def _stt_push(pipeline: Any) -> Callable[[Any], bool]:
    def push(item: rtc.AudioFrame | stt.RecognizeStream._FlushSentinel) -> bool:
        stream = pipeline._recognize_stream
        if stream is None:
            return False  # being re-created: items queue for the new one
        # as `_STTPipeline._audio_input`: a flush reaches the stream only if it takes them
        try:
            if isinstance(item, stt.RecognizeStream._FlushSentinel):
                if stream._stt.capabilities.manual_flush:
                    stream.flush()
            else:
                stream.push_frame(item)
        except RuntimeError:
            log.debug("caller audio after the STT stream ended")
        return True

    return push


def quiet_events_unread(activity: Any, recognition: Any) -> Callable[[], bool]:
    """Whether livekit (1.8.9) would ignore a quiet window's INFERENCE_DONE right now.

    A quiet event says: not speaking, no speech duration, no speech accumulating. Its
    handlers (`AudioRecognition._on_vad_event`, `AgentActivity.on_vad_inference_done`) then
    interrupt the agent only if the interruption's minimum duration is 0, set the user's
    silence event (a no-op once set), and ask the turn detector for a prediction only if
    there is one and recognition thinks the user speaks (an STT start of speech). Outside
    those cases the event changes nothing, so it need not exist."""
    session = activity._session

    def unread() -> bool:
        return (
            activity._user_silence_event.is_set()
            and (recognition._turn_detector_stream is None or not recognition._speaking)
            and session.options.interruption["min_duration"] > 0
        )

    return unread


def vad_events_to(recognition: Any) -> Callable[[vad.VADEvent], None]:
    """A VAD stream's events straight into livekit's (1.8.9) handler, as its VAD task
    would hand them over, without waking that task for each. The handler is a coroutine
    that awaits nothing: it runs to its end here."""
    handle = recognition._on_vad_event

    def deliver(event: vad.VADEvent) -> None:
        try:
            _run_now(handle(event))
        except Exception:  # logged by livekit's wrapper; other calls' windows go on
            log.debug("livekit's VAD event handler failed", exc_info=True)

    return deliver


def _run_now(coro: Coroutine[Any, Any, Any]) -> None:
    try:
        awaited = coro.send(None)
    except StopIteration:
        return
    # it suspended (a livekit whose handler awaits): a task finishes it
    asyncio.get_running_loop().create_task(_finish(coro, awaited))


async def _finish(coro: Coroutine[Any, Any, Any], awaited: Any) -> None:
    while True:
        if awaited is None:  # a bare yield: one loop turn
            await asyncio.sleep(0)
        else:
            await asyncio.wait([awaited])
        try:
            awaited = coro.send(None)
        except StopIteration:
            return
