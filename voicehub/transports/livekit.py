"""A call's audio in a LiveKit room: the `CallTransport` on a published audio source.

The agent's audio goes into an `rtc.AudioSource` (published as the agent's track); the
source paces it in real time and knows when its queue has played out, which is the
playout confirmation delivery waits for: `mark(id)` confirms `id` once everything captured
before it has left the source. `clear` (barge-in) drops the unplayed audio and the marks
still waiting. The caller's audio comes from their microphone track through
`forward_caller_audio`.

This is our own room adapter rather than livekit-agents' `RoomIO` because the voice session
speaks through a `CallTransport` with playout marks, the same for every transport: that is
where a speech is made to end only on confirmed playout and where `VoiceActivity` is fed.
What `RoomIO`'s output does with the source (capture, wait for playout, clear on
interruption) is what this transport does, and what it publishes besides audio
(transcripts on `lk.transcription`, the agent's state) `RoomTranscripts` publishes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Protocol

from voicehub.core.jobs import cancel_and_wait
from voicehub.transports.livekit_transcripts import RoomTranscripts
from voicehub.voice.events import SAMPLE_RATE, ServerEvent
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc

__all__ = ["EVENTS_TOPIC", "AudioSink", "RoomAudioTransport", "forward_caller_audio"]

log = logging.getLogger("voicehub.transports")

EVENTS_TOPIC = "voicehub.events"
"""Data-packet topic of the JSON call events (`voicehub.voice.events`) sent to the caller."""


class AudioSink(Protocol):
    """What the transport needs of the agent's audio track (`rtc.AudioSource` fits)."""

    async def capture_frame(self, frame: rtc.AudioFrame) -> None: ...

    async def wait_for_playout(self) -> None: ...

    def clear_queue(self) -> None: ...


class RoomAudioTransport:
    """A `CallTransport` writing to `sink`; `publish_event` (if given) sends JSON events,
    `transcripts` (if given) shows the call's words and the agent's state in the room.

    `bind(confirm)` names the session's `playout_confirmed`, called with a mark's id once
    the audio before it has played out; marks are confirmed in order, so a later mark
    confirms the earlier ones too. Audio captured after a mark but before the source ran
    dry delays that mark's confirmation (never brings it forward): late is safe, early
    would let delivery speak over audio still playing.
    """

    def __init__(
        self,
        sink: AudioSink,
        *,
        sample_rate: int = SAMPLE_RATE,
        publish_event: Callable[[bytes], Awaitable[None]] | None = None,
        transcripts: RoomTranscripts | None = None,
    ) -> None:
        self._sink = sink
        self._rate = sample_rate
        self._publish_event = publish_event
        self._transcripts = transcripts
        self._confirm: Callable[[str], None] | None = None
        self._marks: list[str] = []
        self._generation = 0  # bumped by clear: a playout wait begun before it is stale
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False

    def bind(self, confirm: Callable[[str], None]) -> None:
        """Where confirmations go (the voice session's `playout_confirmed`)."""
        self._confirm = confirm

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio both ways."""
        return self._rate

    @property
    def pending_marks(self) -> tuple[str, ...]:
        """Marks not yet confirmed, oldest first."""
        return tuple(self._marks)

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio on the track (waits while the source's queue is full)."""
        if self._closed or not pcm16:
            return
        samples = len(pcm16) // 2
        await self._sink.capture_frame(rtc.AudioFrame(pcm16, self._rate, 1, samples))

    async def mark(self, speech_id: str) -> None:
        """Confirm `speech_id` once everything captured so far has played."""
        if self._closed:
            return
        self._marks.append(speech_id)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch_playout())

    async def clear(self) -> None:
        """Drop unplayed audio at once; the marks waiting for it are never confirmed."""
        self._generation += 1
        self._marks.clear()
        self._sink.clear_queue()

    async def send_event(self, event: ServerEvent) -> None:
        """Send a call event to the room: as a reliable data packet (if publishing events)
        and, for transcripts and agent states, as LiveKit's clients show them."""
        if self._closed:
            return
        try:
            if self._publish_event is not None:
                await self._publish_event(event.to_wire().encode())
            if self._transcripts is not None:
                await self._transcripts.publish(event)
        except Exception as exc:  # the room is going away; the call's audio matters more
            log.info("could not publish a call event: %r", exc)

    async def aclose(self) -> None:
        """Stop confirming; later audio and events are dropped."""
        self._closed = True
        self._marks.clear()
        if self._watcher is not None:
            await cancel_and_wait(self._watcher)

    async def _watch_playout(self) -> None:
        while self._marks and not self._closed:
            generation, last = self._generation, self._marks[-1]
            await self._sink.wait_for_playout()
            if generation != self._generation or not self._marks:
                continue  # cleared meanwhile: those marks are void
            # everything up to `last` has played; marks added later wait for the next round
            del self._marks[: self._marks.index(last) + 1]
            if self._confirm is not None:
                self._confirm(last)


async def forward_caller_audio(
    frames: AsyncIterable[rtc.AudioFrameEvent], push: Callable[[bytes], Awaitable[None]]
) -> None:
    """Feed the caller's track (an `rtc.AudioStream` at the session's rate, mono) to `push`
    (the session's `push_audio`) until the stream ends."""
    async for event in frames:
        await push(event.frame.data.tobytes())
