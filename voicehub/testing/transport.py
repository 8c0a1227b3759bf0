"""An in-memory `CallTransport`: a call's line in a test, no socket.

It records the agent's audio, marks, clears and client events, and confirms marks back to
the session it is bound to (`transport.session = session`) in one of three ways:

- ``ack="immediate"``: as soon as the mark arrives (a transport with no playout buffer);
- ``ack="clock"``: ``ack_delay`` seconds later on ``clock`` (a phone with a jitter buffer);
- ``ack="manual"``: only when the test calls `ack` (to hold the agent in "playout pending").

A clear drops the marks still pending, as a flushed buffer has nothing left to confirm.
Tests wait on `wait_for(predicate)`, which wakes on every transport call: no polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Literal, TypeVar

from voicehub.core.clock import Clock, SystemClock
from voicehub.core.jobs import TaskSet
from voicehub.voice.events import ServerEvent
from voicehub.voice.session import VoiceSession

__all__ = ["AckMode", "MemoryTransport"]

AckMode = Literal["immediate", "clock", "manual"]
E = TypeVar("E", bound=ServerEvent)


class MemoryTransport:
    """Records everything the session sends; confirms playout as `ack` says (see the
    module). `clock` times the "clock" confirmations and `first_audio_at`."""

    def __init__(
        self,
        sample_rate: int = 16000,
        *,
        ack: AckMode = "immediate",
        ack_delay: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        self._sample_rate = sample_rate
        self.ack_mode: AckMode = ack
        self.ack_delay = ack_delay
        self.clock: Clock = clock or SystemClock()
        self.session: VoiceSession | None = None
        self.audio = bytearray()
        self.chunks = 0
        self.first_audio_at: float | None = None
        self.marks: list[str] = []
        self.pending: list[str] = []
        self.acked: list[str] = []
        self.clears = 0
        self.events: list[ServerEvent] = []
        self._changed = asyncio.Condition()
        self._acks = TaskSet("memory transport: playout confirmations")

    # -- CallTransport ----------------------------------------------------------------

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    async def send_audio(self, pcm16: bytes) -> None:
        if self.first_audio_at is None:
            self.first_audio_at = self.clock.now()
        self.audio += pcm16
        self.chunks += 1
        await self._notify()

    async def mark(self, speech_id: str) -> None:
        self.marks.append(speech_id)
        self.pending.append(speech_id)
        if self.ack_mode == "immediate":
            self.ack(speech_id)
        elif self.ack_mode == "clock":
            self._acks.start(self._ack_later(speech_id), name=f"ack {speech_id}")
        await self._notify()

    async def clear(self) -> None:
        self.clears += 1
        self.pending.clear()
        await self._notify()

    async def send_event(self, event: ServerEvent) -> None:
        self.events.append(event)
        await self._notify()

    # -- test controls ----------------------------------------------------------------

    def ack(self, speech_id: str | None = None) -> None:
        """Confirm `speech_id` (default: every pending mark) to the bound session."""
        ids = list(self.pending) if speech_id is None else [speech_id]
        for mark in ids:
            if mark in self.pending:
                self.pending.remove(mark)
                self.acked.append(mark)
                if self.session is not None:
                    self.session.playout_confirmed(mark)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait until `predicate()` holds, re-checking after every transport call."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        async with asyncio.timeout(timeout):
            await until()

    def events_of(self, kind: type[E]) -> list[E]:
        """The client events of type `kind` sent so far, in order."""
        return [event for event in self.events if isinstance(event, kind)]

    @property
    def seconds_of_audio(self) -> float:
        """How much agent audio was sent, in seconds."""
        return len(self.audio) / 2 / self._sample_rate

    async def aclose(self) -> None:
        """Drop the confirmations still due on the clock."""
        self._acks.cancel()

    # -- internals --------------------------------------------------------------------

    async def _ack_later(self, speech_id: str) -> None:
        await self.clock.sleep(self.ack_delay)
        self.ack(speech_id)
        await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
