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
        self._clock = 0.0  # stream time of the end of everything pushed
        self.dropped_seconds = 0.0

    # -- in -------------------------------------------------------------------------------

    def push(self, data: bytes) -> None:
        seconds = len(data) / self._rate
        self._unsent.append(Chunk(self._clock, data, seconds))
        self._clock += seconds
        while self._unsent_seconds() > self.max_seconds:
            self._drop_oldest_unsent()

    def mark(self, marker: Marker) -> None:
        self._unsent.append(marker)

    # -- out ------------------------------------------------------------------------------

    def has_unsent(self) -> bool:
        return bool(self._unsent)

    def next_unsent(self) -> Chunk | Marker:
        return self._unsent[0]

    def sent(self) -> None:
        """The head of `unsent` went out; audio waits for its final result."""
        self._unconfirmed.append(self._unsent.popleft())
        while self.unconfirmed_seconds() > self.max_seconds:
            for index, item in enumerate(self._unconfirmed):
                if isinstance(item, Chunk):
                    del self._unconfirmed[index]
                    self.dropped_seconds += item.seconds
                    break

    def confirmed_until(self, stream_time: float) -> None:
        """A final result covers the audio up to `stream_time`: it needs no replay."""
        while self._unconfirmed:
            head = self._unconfirmed[0]
            if not isinstance(head, Chunk) or head.end > stream_time + 1e-6:
                return
            self._unconfirmed.popleft()

    def finalize_confirmed(self) -> None:
        """A `from_finalize` result answered the oldest Finalize (and all audio before it)."""
        while self._unconfirmed:
            if self._unconfirmed.popleft() == "finalize":
                return

    def reconnected(self) -> float:
        """Queue the unconfirmed audio to go out again first; returns the stream time the
        new connection's timeline starts at (its time 0)."""
        replay = list(self._unconfirmed)
        self._unconfirmed.clear()
        self._unsent.extendleft(reversed(replay))
        head = next((item for item in self._unsent if isinstance(item, Chunk)), None)
        return head.start if head is not None else self._clock

    def drain(self) -> list[Chunk | Marker]:
        """Everything owed (unconfirmed first, then unsent), emptying the ledger: for a
        fallback recognizer taking over."""
        items: list[Chunk | Marker] = [*self._unconfirmed, *self._unsent]
        self._unconfirmed.clear()
        self._unsent.clear()
        return items

    def unconfirmed_seconds(self) -> float:
        return sum(item.seconds for item in self._unconfirmed if isinstance(item, Chunk))

    def _unsent_seconds(self) -> float:
        return sum(item.seconds for item in self._unsent if isinstance(item, Chunk))

    def _drop_oldest_unsent(self) -> None:
        for index, item in enumerate(self._unsent):
            if isinstance(item, Chunk):
                del self._unsent[index]
                self.dropped_seconds += item.seconds
                return
