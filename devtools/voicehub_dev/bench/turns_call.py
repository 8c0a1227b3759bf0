"""One bench call for the `turns` bench: a voice session under test, an in-memory caller.

`BenchCall` opens a call to a desk through a `VoiceStack` (whatever session it makes:
the seam is all the bench sees), feeds it a caller's microphone in real time (a 20 ms frame
every 20 ms, silence between utterances) and records what the caller would see: the
client events, when each agent audio segment began to play, the clears. The speaker is
virtual: with `realtime` it plays agent audio at its real pace, confirms each mark when the
audio before it has played and drops what has not played on a clear (so a backchannel
can land on speech still playing); without, it confirms every mark at once (a request's
reply is over in the time the TTS takes). Times are the event loop's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from voicehub.desks.voice_stack import CallSpec
from voicehub.voice.events import AgentState, ServerEvent

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import VoiceStack
    from voicehub.hub import Hub
    from voicehub.voice.session import VoiceSession

__all__ = ["BenchCall", "BenchTransport", "Spoken", "voiced_frames"]

RATE = 16000
FRAME_BYTES = RATE // 50 * 2
FRAME_SECONDS = 0.02


def voiced_frames(pcm16: bytes) -> tuple[list[bytes], int, int]:
    """`pcm16` as 20 ms frames (the last padded), and the indices of its first and last
    frame within 40 dB of the loudest: where the caller's voice starts and ends."""
    padded = pcm16 + bytes(-len(pcm16) % FRAME_BYTES)
    frames = [padded[i : i + FRAME_BYTES] for i in range(0, len(padded), FRAME_BYTES)]
    samples = np.frombuffer(padded, dtype="<i2").astype(np.float64).reshape(len(frames), -1)
    levels = np.sqrt((samples * samples).mean(axis=1))
    loud = np.flatnonzero(levels > levels.max() / 100)
    return frames, int(loud[0]), int(loud[-1])


@dataclass
class Spoken:
    """A caller utterance on the line: when its first voiced frame was pushed and when
    its last one ended (loop time); both set once it has been said."""

    first: float = 0.0
    last: float = 0.0
    done: asyncio.Event = field(default_factory=asyncio.Event)


class BenchTransport:
    """The call's `CallTransport`, with a virtual speaker (see the module)."""

    def __init__(self, *, realtime: bool) -> None:
        self.session: VoiceSession | None = None
        self.realtime = realtime
        self.events: list[tuple[float, ServerEvent]] = []
        self.segments: list[float] = []  # when each agent audio segment began to play
        self.clears: list[float] = []
        self.changed = asyncio.Event()
        self._play_end = 0.0
        self._in_segment = False
        self._acks: set[asyncio.TimerHandle] = set()

    @property
    def sample_rate(self) -> int:
        return RATE

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def send_audio(self, pcm16: bytes) -> None:
        now = self._now()
        start = max(now, self._play_end) if self.realtime else now
        if not self._in_segment:
            self._in_segment = True
            self.segments.append(start)
        if self.realtime:
            self._play_end = start + len(pcm16) / 2 / RATE
        self._notify()

    async def mark(self, speech_id: str) -> None:
        self._in_segment = False
        if not self.realtime:
            self._ack(speech_id)
            return
        loop = asyncio.get_running_loop()
        handle = loop.call_at(max(self._now(), self._play_end), self._ack, speech_id)
        self._acks.add(handle)

    async def clear(self) -> None:
        now = self._now()
        self.clears.append(now)
        for handle in self._acks:
            handle.cancel()
        self._acks.clear()
        self._play_end = now
        self._in_segment = False
        self._notify()

    async def send_event(self, event: ServerEvent) -> None:
        self.events.append((self._now(), event))
        self._notify()

    def playing_until(self) -> float:
        """When the agent audio sent so far will have played."""
        return self._play_end

    def thinking_times(self) -> list[float]:
        """When the agent started each reply ("thinking")."""
        return [at for at, e in self.events if isinstance(e, AgentState) and e.state == "thinking"]

    def _ack(self, speech_id: str) -> None:
        self._acks = {handle for handle in self._acks if not handle.cancelled()}
        if self.session is not None:
            self.session.playout_confirmed(speech_id)
        self._notify()

    def _notify(self) -> None:
        self.changed.set()

    def close(self) -> None:
        for handle in self._acks:
            handle.cancel()
        self._acks.clear()


class BenchCall:
    """One call to `desk` in room `room_id` (see the module); `async with` opens it (and
    waits for the greeting to have played) and closes it."""

    def __init__(
        self,
        voice: VoiceStack,
        hub: Hub,
        desk: Desk,
        room_id: str,
        *,
        realtime: bool,
    ) -> None:
        self.voice, self.hub, self.desk, self.room_id = voice, hub, desk, room_id
        self.transport = BenchTransport(realtime=realtime)
        self._session: VoiceSession | None = None
        self._queue: deque[tuple[bytes, Spoken | None, str]] = deque()
        self._mic: asyncio.Task[None] | None = None
        self._speak_at = 0.0

    @property
    def session(self) -> VoiceSession:
        assert self._session is not None, "the call is not open"
        return self._session

    async def __aenter__(self) -> BenchCall:
        call = await CallSpec.for_room(self.hub, self.desk, self.room_id, self.transport)
        self._session = await self.voice.start(call)
        self.transport.session = self._session
        self._mic = asyncio.create_task(self._run_mic())
        await self.wait_quiet(0.3, timeout=30.0)  # the greeting has played
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._mic is not None:
            self._mic.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._mic
        self.transport.close()
        if self._session is not None:
            await self._session.aclose()

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def speak(self, pcm16: bytes, at: float | None = None) -> Spoken:
        """Say `pcm16` from loop time `at` (the next frame, by default) and return once its
        last frame has been pushed."""
        frames, first, last = voiced_frames(pcm16)
        spoken = Spoken()
        for index, frame in enumerate(frames):
            mark = ""
            if index == first:
                mark = "both" if first == last else "first"
            elif index == last:
                mark = "last"
            self._queue.append((frame, spoken if mark else None, mark))
        self._speak_at = at if at is not None else self.now()
        await spoken.done.wait()
        return spoken

    async def wait_for(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Wait until `condition()` holds (checked on every transport change and every
        20 ms); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            left = deadline - loop.time()
            if left <= 0:
                return False
            self.transport.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.transport.changed.wait(), min(left, FRAME_SECONDS))
        return True

    async def wait_quiet(self, quiet: float, timeout: float, *, not_before: float = 0.0) -> bool:
        """Wait until the call has been idle (nobody speaking, thinking or playing) for
        `quiet` seconds, and it is `not_before` or later; False on timeout."""
        clock = self.hub.clock

        def settled() -> bool:
            snapshot = self.session.activity.snapshot()
            since = snapshot.idle_since
            return (
                since is not None
                and clock.now() - since >= quiet
                and self.now() >= not_before
                and self.now() >= self.transport.playing_until()
            )

        return await self.wait_for(settled, timeout)

    async def _run_mic(self) -> None:
        """A frame every 20 ms on absolute deadlines: queued speech once due, else silence."""
        loop = asyncio.get_running_loop()
        silence = bytes(FRAME_BYTES)
        start, count = loop.time(), 0
        while True:
            frame, spoken, mark = silence, None, ""
            if self._queue and loop.time() >= self._speak_at:
                frame, spoken, mark = self._queue.popleft()
            pushed = loop.time()
            await self.session.push_audio(frame)
            if spoken is not None:
                if mark in ("first", "both"):
                    spoken.first = pushed
                if mark in ("last", "both"):
                    spoken.last = pushed + FRAME_SECONDS
                    spoken.done.set()
            count += 1
            delay = start + count * FRAME_SECONDS - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
