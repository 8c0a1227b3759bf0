"""Call audio in and out of a livekit `AgentSession`, over a `CallTransport`.

- :class:`CallerAudioInput`: caller PCM16 (any chunk size) as 20 ms ``rtc.AudioFrame``s.
- :class:`TransportAudioOutput`: agent audio to the transport. livekit cuts its output into
  segments (first ``capture_frame`` to ``flush``); each segment gets an id, a mark on the
  transport, and ``on_playback_finished`` only when the transport confirms that mark - so
  livekit's ``SpeechHandle`` is done only once the caller has heard it. ``clear_buffer``
  (a barge-in) clears the transport and finishes the open segments as interrupted.

Both feed `VoiceActivity` directly: a segment id is a "speech" there (started at its first
frame, finished at its flush, played at its confirmation). Per frame they do no more than
hand the frame over: resampling to the transport rate happens in livekit (native code).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from voicehub.voice.audio import FrameSplitter, frame_bytes
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents.voice import io

if TYPE_CHECKING:
    from voicehub.voice.activity import VoiceActivity
    from voicehub.voice.transport import CallTransport

__all__ = ["CallerAudioInput", "TransportAudioOutput"]

log = logging.getLogger("voicehub.voice")


class CallerAudioInput(io.AudioInput):
    """Caller PCM16 at `sample_rate` as 20 ms frames; a whole frame passes without copying
    through the splitter. `close()` ends the stream."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__(label="voicehub.caller")
        self._rate = sample_rate
        self._frame = frame_bytes(sample_rate)
        self._samples = self._frame // 2
        self._splitter = FrameSplitter(sample_rate)
        self._frames: asyncio.Queue[rtc.AudioFrame | None] = asyncio.Queue()

    def push(self, pcm16: bytes) -> None:
        """Queue caller audio (a partial frame waits for the rest)."""
        if len(pcm16) == self._frame and not self._splitter.pending:
            self._frames.put_nowait(rtc.AudioFrame(pcm16, self._rate, 1, self._samples))
            return
        for chunk in self._splitter.push(pcm16):
            self._frames.put_nowait(rtc.AudioFrame(chunk, self._rate, 1, self._samples))

    def close(self) -> None:
        """End the stream after the frames already queued."""
        self._frames.put_nowait(None)

    async def __anext__(self) -> rtc.AudioFrame:
        frame = await self._frames.get()
        if frame is None:
            raise StopAsyncIteration
        return frame


class _Segment:
    __slots__ = ("cut", "duration", "id", "started")

    def __init__(self, segment_id: str) -> None:
        self.id = segment_id
        self.duration = 0.0
        self.started = time.monotonic()
        self.cut = False


class TransportAudioOutput(io.AudioOutput):
    """Agent audio to `transport`, one mark per segment, playout ended by confirmation.

    `new_segment` is called at a segment's first frame and returns its id (the mark id);
    it may report the start to the activity itself (a repeated start is a no-op).
    `hold_segment`, called right after it, may hold the segment back: True cuts it before
    its first frame is sent (a result whose caller just started talking).
    """

    def __init__(
        self,
        transport: CallTransport,
        activity: VoiceActivity,
        new_segment: Callable[[], str],
        hold_segment: Callable[[], bool] | None = None,
    ) -> None:
        # livekit resamples TTS audio to this rate before capture_frame
        super().__init__(
            label="voicehub.transport",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=transport.sample_rate,
        )
        self._transport = transport
        self._activity = activity
        self._new_segment = new_segment
        self._hold_segment = hold_segment
        self._segment: _Segment | None = None
        self._unplayed: deque[_Segment] = deque()  # flushed, mark not yet confirmed
        self._control: asyncio.Task[None] | None = None  # the latest mark or clear

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Send one frame to the transport (livekit pushes faster than real time)."""
        await super().capture_frame(frame)
        segment = self._segment
        if segment is None:
            segment = self._segment = _Segment(self._new_segment())
            self._activity.agent_speech_started(segment.id)
            self.on_playback_started(created_at=time.time())
            if self._hold_segment is not None and self._hold_segment():
                self.clear_buffer()  # nothing of it goes out; it ends interrupted
        if segment.cut:
            return  # cleared (or held) while livekit was still pushing it
        segment.duration += frame.duration
        control = self._control
        if control is not None and not control.done():
            await control  # audio must not overtake a mark or a clear
        await self._transport.send_audio(frame.data.tobytes())

    def flush(self) -> None:
        """End the segment: ask the transport to confirm when it has played."""
        super().flush()
        segment, self._segment = self._segment, None
        if segment is None or segment.cut:
            return
        self._unplayed.append(segment)
        self._activity.agent_speech_finished(segment.id, interrupted=False)
        self._send(self._transport.mark, segment.id)

    def clear_buffer(self) -> None:
        """Drop unplayed audio (barge-in): its segments end interrupted, marks ignored."""
        cut = list(self._unplayed)
        self._unplayed.clear()
        if self._segment is not None and not self._segment.cut:
            self._segment.cut = True
            cut.append(self._segment)
        if not cut:
            return
        self._send(self._transport.clear)
        for segment in cut:
            self._activity.agent_speech_finished(segment.id, interrupted=True)
            played = min(segment.duration, time.monotonic() - segment.started)
            self.on_playback_finished(playback_position=played, interrupted=True)

    def confirm(self, segment_id: str) -> None:
        """The transport played everything up to `segment_id`'s mark (marks come in
        order, so earlier segments are confirmed too). Unknown ids are ignored."""
        if all(segment.id != segment_id for segment in self._unplayed):
            return  # cut, already confirmed, or not ours
        while self._unplayed:
            segment = self._unplayed.popleft()
            self._activity.playout_confirmed(segment.id)
            self.on_playback_finished(playback_position=segment.duration, interrupted=False)
            if segment.id == segment_id:
                return

    async def drain(self) -> None:
        """Wait for the marks and clears already requested."""
        if self._control is not None:
            await self._control

    def _send(self, call: Callable[..., Awaitable[None]], *args: str) -> None:
        # flush() and clear_buffer() are synchronous: chain the transport calls in order
        previous = self._control

        async def run() -> None:
            if previous is not None:
                await previous
            try:
                await call(*args)
            except Exception:
                log.exception("transport %s failed", getattr(call, "__name__", call))

        self._control = asyncio.create_task(run())
