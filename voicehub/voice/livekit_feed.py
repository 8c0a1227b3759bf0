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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.utils import aio

__all__ = ["DirectChan", "DirectFeed"]

log = logging.getLogger("voicehub.voice")

_LOOK_AGAIN = 25  # frames (0.5 s) between looks at channels already replaced

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
