"""The audio a Deepgram listen stream owes the server, kept so a reconnect loses nothing.

Sans I/O. Two bounded queues on one timeline (seconds of audio since the stream began):

- *unsent*: audio (and Finalize/end markers) not yet handed to a socket; it grows while the
  socket is down;
- *unconfirmed*: audio sent but not yet covered by an `is_final` result, and markers sent
  but not yet answered (a socket takes whole utterances, Finalize and CloseStream into its
  buffers before a drop shows). After a reconnect it all goes out again first, so the
  caller's turn is recognized whole.

Both are capped at `max_seconds`; past it the oldest audio goes (logged by the stream).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

Marker = Literal["finalize", "end"]


@dataclass(frozen=True)
class Chunk:
    """Encoded audio starting `start` seconds into the stream."""

    start: float
    data: bytes
    seconds: float

    @property
    def end(self) -> float:
        return self.start + self.seconds


class AudioLedger:
    """Unsent and unconfirmed audio of one stream; `bytes_per_second` of the wire encoding."""

    def __init__(self, bytes_per_second: int, max_seconds: float = 20.0) -> None:
        self._rate = bytes_per_second
        self.max_seconds = max_seconds
        self._unsent: deque[Chunk | Marker] = deque()
        self._unconfirmed: deque[Chunk | Marker] = deque()
        # running totals: this runs on every 20 ms frame of every call
        self._unsent_seconds = self._unconfirmed_seconds = 0.0
        self._clock = 0.0  # stream time of the end of everything pushed
        self.dropped_seconds = 0.0

    # -- in -------------------------------------------------------------------------------

    def push(self, data: bytes) -> None:
        seconds = len(data) / self._rate
        self._unsent.append(Chunk(self._clock, data, seconds))
        self._unsent_seconds += seconds
        self._clock += seconds
        while self._unsent_seconds > self.max_seconds + 1e-9:
            self._unsent_seconds -= self._drop_oldest(self._unsent)

    def mark(self, marker: Marker) -> None:
        self._unsent.append(marker)

    # -- out ------------------------------------------------------------------------------

    def has_unsent(self) -> bool:
        return bool(self._unsent)

    def next_unsent(self) -> Chunk | Marker:
        return self._unsent[0]

    def sent(self) -> None:
        """The head of `unsent` went out; audio waits for its final result."""
        item = self._unsent.popleft()
        self._unconfirmed.append(item)
        if isinstance(item, Chunk):
            self._unsent_seconds -= item.seconds
            self._unconfirmed_seconds += item.seconds
        while self._unconfirmed_seconds > self.max_seconds + 1e-9:
            self._unconfirmed_seconds -= self._drop_oldest(self._unconfirmed)

    def confirmed_until(self, stream_time: float) -> None:
        """A final result covers the audio up to `stream_time`: it needs no replay."""
        while self._unconfirmed:
            head = self._unconfirmed[0]
            if not isinstance(head, Chunk) or head.end > stream_time + 1e-6:
                return
            self._unconfirmed.popleft()
            self._unconfirmed_seconds -= head.seconds

    def finalize_confirmed(self) -> None:
        """A `from_finalize` result answered the oldest Finalize (and all audio before it)."""
        while self._unconfirmed:
            item = self._unconfirmed.popleft()
            if isinstance(item, Chunk):
                self._unconfirmed_seconds -= item.seconds
            elif item == "finalize":
                return

    def reconnected(self) -> float:
        """Queue the unconfirmed audio to go out again first; returns the stream time the
        new connection's timeline starts at (its time 0)."""
        self._unsent.extendleft(reversed(self._unconfirmed))
        self._unconfirmed.clear()
        self._unsent_seconds += self._unconfirmed_seconds
        self._unconfirmed_seconds = 0.0
        head = next((item for item in self._unsent if isinstance(item, Chunk)), None)
        return head.start if head is not None else self._clock

    def drain(self) -> list[Chunk | Marker]:
        """Everything owed (unconfirmed first, then unsent), emptying the ledger: for a
        fallback recognizer taking over."""
        items: list[Chunk | Marker] = [*self._unconfirmed, *self._unsent]
        self._unconfirmed.clear()
        self._unsent.clear()
        self._unsent_seconds = self._unconfirmed_seconds = 0.0
        return items

    def unconfirmed_seconds(self) -> float:
        return self._unconfirmed_seconds

    def _drop_oldest(self, queue: deque[Chunk | Marker]) -> float:
        for index, item in enumerate(queue):
            if isinstance(item, Chunk):
                del queue[index]
                self.dropped_seconds += item.seconds
                return item.seconds
        raise AssertionError("audio totals out of step with the queue")  # never: totals > 0
