"""The caller's end of a carrier media stream, the same machinery for every carrier's side.

A carrier is a WebSocket *client* of the server: it opens the stream its answer named,
sends its opening frames, then a frame of caller audio every 20 ms (silence between
utterances, as an open phone line does), plays the agent's audio on a virtual speaker
(`playout_speed` times real time, on an injected clock) and answers each mark once the audio
before it has played; on a clear it drops the unplayed audio and does what that carrier
does with the marks still queued (Telnyx returns them, Plivo and Vonage forget them). Audio
past a carrier's buffer (Vonage's 3072 frames) is lost, and recorded as a problem.

What differs per carrier is its `Dialect` (the frames, written from the carrier's published
docs, not from voicehub's codecs): `voicehub.client.telnyx`, `.plivo`, `.vonage`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from voicehub.core.clock import Clock
from voicehub.voice.audio import lin2ulaw, resample_pcm16, ulaw2lin

__all__ = ["CarrierLine", "Dialect", "Heard", "Played"]

FRAME_SECONDS = 0.02
_INTERNAL_ERROR = 1011  # the server closed the stream: the call could not start (or broke)

Heard = (
    tuple[Literal["audio"], bytes]  # agent audio, PCM16 at the dialect's rate
    | tuple[Literal["mark"], str]
    | tuple[Literal["clear"], None]
    | tuple[Literal["problem"], str]  # a frame the real carrier would reject
)


class Dialect(Protocol):
    """One carrier's side of its media-stream protocol."""

    encoding: Literal["mulaw", "pcm16"]
    rate: int
    marks_returned_on_clear: bool
    # Frames of audio the carrier buffers ahead of playback; one more is lost (None: no bound).
    buffer_frames: int | None

    def opening(self) -> list[str]:
        """The frames sent once the socket is open (connected, start)."""
        ...

    def media(self, chunk: bytes, number: int) -> str | bytes:
        """A frame of caller audio (20 ms in the wire's encoding), the `number`th."""
        ...

    def dtmf(self, digit: str) -> str: ...

    def stop(self) -> str | None:
        """The frame a hang-up sends before the socket closes (None: the carrier has none)."""
        ...

    def heard(self, message: str | bytes) -> list[Heard]:
        """What one frame from the server means."""
        ...

    def mark_played(self, name: str) -> str:
        """The frame telling the server mark `name` has played."""
        ...

    def cleared(self) -> str | None:
        """The frame acknowledging a clear (None: the carrier sends none)."""
        ...


@dataclass
class Played:
    """Agent audio that has "played" (PCM16 at the dialect's rate) and the marks answered."""

    pcm16: bytearray = field(default_factory=bytearray)
    marks: list[tuple[str, float]] = field(default_factory=list)  # name, clock time
    arrivals: list[float] = field(default_factory=list)  # clock time of each audio frame

    def first_audio_after(self, moment: float) -> float | None:
        """When the first agent audio after `moment` arrived (None: none yet)."""
        return next((at for at in self.arrivals if at > moment), None)


class CarrierLine:
    """One media stream from the carrier's side (see the module)."""

    def __init__(
        self,
        url: str,
        dialect: Dialect,
        *,
        clock: Clock,
        playout_speed: float = 16.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.url, self.dialect, self.clock = url, dialect, clock
        self.playout_speed = playout_speed
        self.headers = dict(headers or {})
        self.played = Played()
        self.problems: list[str] = []
        self.clears = 0
        self.media_received = 0
        self.last_audio_at = clock.now()
        self.closed = asyncio.Event()
        self.close_code: int | None = None  # how the server closed the stream, if it did
        self.close_reason = ""
        self.hold_marks = False  # a stalled line: audio "plays" but no mark is answered
        self._held_marks: list[str] = []
        self._ws: ClientConnection | None = None
        self._speech: deque[bytes] = deque()
        self._speech_done: asyncio.Event | None = None
        self._inbox: deque[Heard] = deque()
        self._audio_buffered = 0  # audio frames in the inbox
        self.frames_lost = 0  # audio past the carrier's buffer
        self._inbox_ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._chunks = 0

    @property
    def frame_bytes(self) -> int:
        per_sample = 1 if self.dialect.encoding == "mulaw" else 2
        return self.dialect.rate // 50 * per_sample

    @property
    def silence(self) -> bytes:
        return (b"\xff" if self.dialect.encoding == "mulaw" else b"\x00") * self.frame_bytes

    async def open(self) -> None:
        self._ws = await connect(
            self.url, max_size=None, compression=None, additional_headers=self.headers
        )
        for frame in self.dialect.opening():
            await self.send(frame)
        for job in (self._mic(), self._receive(), self._speaker()):
            self._tasks.append(asyncio.create_task(job))

    async def send(self, frame: str | bytes) -> None:
        assert self._ws is not None
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(frame)

    async def press(self, digit: str) -> None:
        await self.send(self.dialect.dtmf(digit))

    async def say(self, pcm16: bytes, sample_rate: int = 16000) -> None:
        """Speak caller audio down the line in real time; returns once it has been sent."""
        audio = resample_pcm16(pcm16, sample_rate, self.dialect.rate)
        wire = lin2ulaw(audio) if self.dialect.encoding == "mulaw" else audio
        size = self.frame_bytes
        wire += self.silence[: -len(wire) % size]
        self._speech.extend(wire[i : i + size] for i in range(0, len(wire), size))
        self._speech_done = done = asyncio.Event()
        spoken = asyncio.ensure_future(done.wait())
        gone = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait({spoken, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            spoken.cancel()
            gone.cancel()

    async def hang_up(self) -> None:
        """The caller hangs up: the carrier's stop (if it has one), then the socket closes."""
        stop = self.dialect.stop()
        if self._ws is not None and not self.closed.is_set() and stop is not None:
            await self.send(stop)
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._ws is not None:
            await self._ws.close()
        self.closed.set()

    async def wait_quiet(self, quiet: float, *, after: int = 0, timeout: float = 60.0) -> None:
        """Until more than `after` audio frames arrived, all played, every mark answered,
        and no agent audio came for `quiet` seconds."""

        async def until() -> None:
            while True:
                left = self.last_audio_at + quiet - self.clock.now()
                if left <= 0 and not self._inbox and self.media_received > after:
                    return
                await self.clock.sleep(max(left, 0.05))

        async with asyncio.timeout(timeout):
            await until()

    async def release_marks(self) -> None:
        """Answer the marks held back since `hold_marks` was set, and stop holding."""
        self.hold_marks = False
        held, self._held_marks = self._held_marks, []
        for name in held:
            await self._answer(name)

    # -- internals -------------------------------------------------------------------------

    async def _mic(self) -> None:
        next_at = self.clock.now()
        while not self.closed.is_set():
            chunk = self._speech.popleft() if self._speech else self.silence
            if not self._speech and self._speech_done is not None:
                self._speech_done.set()
                self._speech_done = None
            self._chunks += 1
            await self.send(self.dialect.media(chunk, self._chunks))
            next_at += FRAME_SECONDS
            await self.clock.sleep(max(0.0, next_at - self.clock.now()))

    async def _receive(self) -> None:
        assert self._ws is not None
        try:
            async for message in self._ws:
                for item in self.dialect.heard(message):
                    await self._take(item)
                self._inbox_ready.set()
        except ConnectionClosed:
            pass
        finally:
            if (code := self._ws.close_code) is not None:
                self.close_code, self.close_reason = code, self._ws.close_reason or ""
            self.closed.set()
            self._inbox_ready.set()

    def refusal(self) -> str | None:
        """Why the server refused the call, if it did (see `PhoneLineClient.refusal`)."""
        if not self.closed.is_set() or self.close_code != _INTERNAL_ERROR or self.media_received:
            return None
        return self.close_reason or "the server could not start the call"

    async def _take(self, item: Heard) -> None:
        if item[0] == "problem":
            self.problems.append(item[1])
        elif item[0] == "audio":
            self.media_received += 1
            self.played.arrivals.append(self.clock.now())
            self.last_audio_at = self.clock.now()
            limit = self.dialect.buffer_frames
            if limit is not None and self._audio_buffered >= limit:
                if not self.frames_lost:
                    self.problems.append(f"audio past the buffer of {limit} frames was lost")
                self.frames_lost += 1
                return
            self._inbox.append(item)
            self._audio_buffered += 1
        elif item[0] == "mark":
            self._inbox.append(item)
        else:
            self.clears += 1
            queued = [name for kind, name in self._inbox if kind == "mark"]
            marks = [*self._held_marks, *queued]
            self._inbox.clear()
            self._audio_buffered = 0
            self._held_marks = []
            cleared = self.dialect.cleared()
            if cleared is not None:
                await self.send(cleared)
            if self.dialect.marks_returned_on_clear:
                for name in marks:
                    await self._answer(str(name))

    async def _speaker(self) -> None:
        while True:
            while not self._inbox:
                if self.closed.is_set():
                    return
                self._inbox_ready.clear()
                await self._inbox_ready.wait()
            item = self._inbox[0]
            if item[0] == "audio":
                audio = item[1]
                await self.clock.sleep(len(audio) / 2 / self.dialect.rate / self.playout_speed)
                if self._inbox and self._inbox[0] is item:  # not cleared meanwhile
                    self._inbox.popleft()
                    self._audio_buffered -= 1
                    self.played.pcm16.extend(audio)
                    self.last_audio_at = self.clock.now()
            else:
                self._inbox.popleft()
                name = str(item[1])
                if self.hold_marks:
                    self._held_marks.append(name)
                else:
                    await self._answer(name)

    async def _answer(self, name: str) -> None:
        await self.send(self.dialect.mark_played(name))
        self.played.marks.append((name, self.clock.now()))


def pcm16_of(dialect: Dialect, wire: bytes) -> bytes:
    """Agent audio in the dialect's wire encoding as PCM16."""
    return ulaw2lin(wire) if dialect.encoding == "mulaw" else wire
