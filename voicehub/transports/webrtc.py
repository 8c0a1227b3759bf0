"""The WebRTC `CallTransport`: agent audio on a paced track, events on a data channel.

One peer connection per call (signaling: `voicehub.server.webrtc`). The caller's track
(Opus, 48 kHz) is decoded, mixed to mono and resampled to the session rate, then handed
over in 20 ms frames. Agent audio goes into a `PlayoutQueue` that the outbound track takes
one frame at a time, in real time; a speech mark becomes a `speech_mark` event on the data
channel once its audio has gone out, and the client acks it with `playout` once played,
so delivery idle stays confirmed by the client. `clear` (barge-in) empties the queue at
once and tells the client to drop what its jitter buffer holds.

The data channel carries the JSON events of `voicehub.voice.events`, both ways, exactly as
the WebSocket protocol does (events sent before it opens wait for it). `watch` ends the call
when the peer goes silent: ICE failed or closed, or no caller audio for `silence_timeout`
seconds on the injected clock.

This module never imports aiortc itself: the server builds the peer connection and
attaches its channel and tracks (any objects of the same shape, so tests can use fakes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from voicehub.core.clock import Clock, SystemClock
from voicehub.transports.rtc_media import PcmDecoder, paced_track
from voicehub.voice.audio import FrameSplitter
from voicehub.voice.audio.playout import PlayoutQueue
from voicehub.voice.events import SAMPLE_RATE, CallError, ClearAudio, ServerEvent, SpeechMark

__all__ = ["DataChannel", "InboundTrack", "WebRTCTransport"]

log = logging.getLogger("voicehub.webrtc")

AudioSink = Callable[[bytes], Awaitable[None]]


class DataChannel(Protocol):
    """The part of aiortc's `RTCDataChannel` the transport uses."""

    @property
    def readyState(self) -> str: ...

    def send(self, data: str | bytes) -> None: ...

    def on(self, event: str, handler: Callable[..., Any]) -> Any: ...


class InboundTrack(Protocol):
    """The part of a received aiortc audio track the transport uses."""

    async def recv(self) -> Any: ...


class WebRTCTransport:
    """A `CallTransport` over one peer connection (see the module docstring)."""

    def __init__(
        self,
        *,
        sample_rate: int = SAMPLE_RATE,
        clock: Clock | None = None,
        silence_timeout: float = 10.0,
        peer_state: Callable[[], str] = lambda: "new",
    ) -> None:
        self._sample_rate = sample_rate
        self.clock = clock or SystemClock()
        self.silence_timeout = silence_timeout
        self.peer_state = peer_state  # the peer connection's connectionState, read live
        self.queue = PlayoutQueue(sample_rate)
        self.channel: DataChannel | None = None
        self.messages: asyncio.Queue[str | bytes] = asyncio.Queue()
        self.audio_sink: AudioSink | None = None  # the session's push_audio, once it runs
        self.ended = asyncio.Event()
        self.end_reason = ""
        self.last_heard = self.clock.now()
        self.audio_frames_sent = 0
        self._waiting: list[str] = []  # events sent before the channel opened
        self._reader: asyncio.Task[None] | None = None

    # -- CallTransport ---------------------------------------------------------------------

    @property
    def sample_rate(self) -> int:
        """Rate of the PCM16 audio in both directions (the session's)."""
        return self._sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        """Queue agent audio; the outbound track plays it in real time."""
        if not self.ended.is_set():
            self.queue.put_audio(pcm16)

    async def mark(self, speech_id: str) -> None:
        """Send `speech_mark` once the audio queued so far has gone out on the track."""
        self.queue.put_mark(speech_id)

    async def clear(self) -> None:
        """Barge-in: drop unsent agent audio now and tell the client to flush its buffer."""
        dropped = self.queue.clear()
        log.debug("barge-in: dropped %d bytes of agent audio", dropped)
        self.send_event_nowait(ClearAudio())

    async def send_event(self, event: ServerEvent) -> None:
        """Send an event on the data channel."""
        self.send_event_nowait(event)

    # -- what the server uses --------------------------------------------------------------

    def send_event_nowait(self, event: ServerEvent) -> None:
        """`send_event` for synchronous callers (hooks)."""
        if self.ended.is_set():
            return
        wire = event.to_wire()
        channel = self.channel
        if channel is None or channel.readyState != "open":
            self._waiting.append(wire)
            return
        try:
            channel.send(wire)
        except Exception as exc:  # the channel broke: the watchdog ends the call
            log.info("data channel send failed: %r", exc)

    def close(self, code: int = 1000, reason: str = "") -> None:
        """End the call; a reason other than a normal end is sent as an error event first."""
        if self.ended.is_set():
            return
        if code != 1000 and reason:
            self.send_event_nowait(CallError(code=f"closed_{code}", message=reason))
        self.end_reason = reason or "call ended"
        self.ended.set()

    def outbound_track(self) -> Any:
        """The aiortc track that plays the agent's audio (one per transport)."""
        return paced_track(self.queue, on_marks=self._marks_due, on_audio=self._audio_sent)

    def attach_channel(self, channel: DataChannel) -> None:
        """Use `channel` for events; its messages go to `messages`."""
        self.channel = channel
        channel.on("open", self._flush_waiting)
        channel.on("message", self.messages.put_nowait)
        if channel.readyState == "open":
            self._flush_waiting()

    def attach_track(self, track: InboundTrack) -> None:
        """Read the caller's audio from `track` until it ends."""
        if self._reader is None:
            self._reader = asyncio.create_task(self._read_audio(track))

    async def watch(self, check_every: float = 0.5) -> str:
        """Return why the peer is gone: ICE failed or closed, or silence for too long."""
        self.last_heard = max(self.last_heard, self.clock.now())  # silence counts from now
        while True:
            state = self.peer_state()
            if state in ("failed", "closed"):
                return f"the connection {state}"
            silent = self.clock.now() - self.last_heard
            if silent > self.silence_timeout:
                return f"no audio from the caller for {silent:.1f} s"
            await self.clock.sleep(check_every)

    async def events_sent(self, timeout: float, check_every: float = 0.02) -> bool:
        """Wait, at most `timeout` seconds on the clock, until every event sent so far has
        left on the data channel (it opened, and its buffer drained); True if it did. The
        last events of a call (why it could not start) must leave before the peer closes:
        the channel opens only after the peer connects, so a call refused at once has sent
        them while it was still connecting."""
        deadline = self.clock.now() + timeout
        while True:
            channel = self.channel
            if not self._waiting and (channel is None or _buffered(channel) == 0):
                return not self._waiting
            if self.clock.now() >= deadline or self.peer_state() in ("failed", "closed"):
                return False
            await self.clock.sleep(check_every)

    async def aclose(self) -> None:
        """Stop reading the caller's audio."""
        self.ended.set()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    # -- internals -------------------------------------------------------------------------

    def _marks_due(self, marks: tuple[str, ...], track_ms: int) -> None:
        for mark_id in marks:
            self.send_event_nowait(SpeechMark(id=mark_id, track_ms=track_ms))

    def _audio_sent(self) -> None:
        self.audio_frames_sent += 1

    def _flush_waiting(self) -> None:
        channel, waiting = self.channel, self._waiting
        self._waiting = []
        if channel is not None:
            for wire in waiting:
                channel.send(wire)

    async def _read_audio(self, track: InboundTrack) -> None:
        decoder = PcmDecoder(self._sample_rate)
        frames = FrameSplitter(self._sample_rate)
        while True:
            try:
                received = await track.recv()
            except Exception:  # MediaStreamError: the track ended; the watchdog decides
                return
            self.last_heard = self.clock.now()
            sink = self.audio_sink
            for frame in frames.push(decoder.decode(received)):
                if sink is not None:  # before the session runs, caller audio is dropped
                    await sink(frame)


def _buffered(channel: DataChannel) -> int:
    """Bytes the channel still holds to send (aiortc's `bufferedAmount`; 0 if it has none)."""
    amount = getattr(channel, "bufferedAmount", 0)
    return amount if isinstance(amount, int) else 0
