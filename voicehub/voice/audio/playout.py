"""A playout queue for transports that send audio in real time (WebRTC).

The voice session queues agent audio and speech marks faster than real time; the transport
takes one 20 ms frame per tick. A mark is due once every byte queued before it has been
taken, so the transport can tell the client "that speech has been sent" at the right moment
rather than when the bytes were merely queued. `clear` drops the unsent audio at once (the
caller barged in); the marks that were waiting become due with it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from voicehub.voice.audio.framing import frame_bytes

__all__ = ["PlayoutQueue", "Tick"]


@dataclass(frozen=True, slots=True)
class Tick:
    """One frame's worth of playout: audio (None when nothing is queued) and the marks whose
    audio has now all been taken."""

    audio: bytes | None
    marks: tuple[str, ...]


class PlayoutQueue:
    """Agent audio and speech marks in order, taken out one 20 ms frame at a time."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.frame_bytes = frame_bytes(sample_rate)
        self._items: deque[bytes | str] = deque()  # bytes: audio, str: a mark id
        self._head = 0  # bytes of the first audio item already taken
        self.queued_bytes = 0

    def put_audio(self, pcm16: bytes) -> None:
        """Queue agent audio (PCM16 mono at `sample_rate`, any length)."""
        if pcm16:
            self._items.append(bytes(pcm16))
            self.queued_bytes += len(pcm16)

    def put_mark(self, speech_id: str) -> None:
        """Queue a mark after the audio queued so far."""
        self._items.append(speech_id)

    def clear(self) -> int:
        """Drop the unsent audio (marks stay, and fall due at the next tick); returns the
        number of bytes dropped."""
        dropped = self.queued_bytes
        self._items = deque(item for item in self._items if isinstance(item, str))
        self._head = 0
        self.queued_bytes = 0
        return dropped

    def tick(self) -> Tick:
        """Take the next frame (padded with silence when the queue runs dry mid-frame)."""
        wanted = self.frame_bytes
        chunks: list[bytes] = []
        marks: list[str] = []
        items = self._items
        while items:
            item = items[0]
            if isinstance(item, str):
                marks.append(item)
                items.popleft()
                continue
            if not wanted:
                break
            piece = item[self._head : self._head + wanted]
            chunks.append(piece)
            wanted -= len(piece)
            self._head += len(piece)
            self.queued_bytes -= len(piece)
            if self._head == len(item):
                items.popleft()
                self._head = 0
        if not chunks:
            return Tick(None, tuple(marks))
        audio = b"".join(chunks)
        return Tick(audio + bytes(self.frame_bytes - len(audio)), tuple(marks))
