"""The one writer of a call's socket: an ordered send queue, its pump, and the close.

Every socket transport (the WebSocket call protocol, each carrier's media stream) puts
frames here and never writes to the socket itself, so frames never interleave and a mark
always follows the audio it marks. `pump` is the only coroutine that sends: it runs until
the queued close went out or the socket failed; after `close` (or once the socket failed)
frames are dropped, since nobody will hear them. `drop` removes queued frames (a barge-in
drops the agent's unsent audio). With a `Pacer` (a carrier whose playback buffer is bounded:
`voicehub.transports.phone_pacing`) the pump waits, on the pacer's clock, before each frame
the pacer holds back; a frame queued or dropped meanwhile is seen at once.

    queue = SendQueue()
    queue.put(b"...")                  # audio, or a text frame
    queue.close(1000, "call ended")    # what is queued goes out first
    await queue.pump(websocket)        # in its own task
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from voicehub.core.clock import Clock, wait_or_sleep

__all__ = ["MAX_CLOSE_REASON_BYTES", "OutboundSocket", "Pacer", "SendQueue", "close_reason"]

MAX_CLOSE_REASON_BYTES = 123  # RFC 6455: a close frame's payload is 125 bytes, 2 of them the code


class OutboundSocket(Protocol):
    """The sending half of a WebSocket (Starlette's `WebSocket` fits)."""

    async def send_bytes(self, data: bytes) -> None: ...

    async def send_text(self, data: str) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


def close_reason(reason: str) -> str:
    """`reason` cut to fit a close frame (123 bytes of UTF-8), on a character boundary."""
    encoded = reason.encode("utf-8")
    if len(encoded) <= MAX_CLOSE_REASON_BYTES:
        return reason
    return encoded[: MAX_CLOSE_REASON_BYTES - 3].decode("utf-8", "ignore") + "..."


@dataclass(frozen=True, slots=True)
class _Close:
    code: int
    reason: str


Frame = bytes | str


class Pacer(Protocol):
    """When the next frame may go (`voicehub.transports.phone_pacing.PlayoutPacer`)."""

    @property
    def clock(self) -> Clock: ...

    def delay(self, frame: Frame) -> float:
        """Seconds to wait before `frame` may be sent (0: at once)."""
        ...

    def sent(self, frame: Frame) -> None: ...


class SendQueue:
    """Frames for one socket, in order, then its close (see the module)."""

    def __init__(self, *, pacer: Pacer | None = None) -> None:
        self._pacer = pacer
        self._queue: deque[Frame | _Close] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self.bytes_sent = 0  # binary payload bytes the socket took
        self.frames_sent = 0

    @property
    def closing(self) -> bool:
        """True once `close` was called or the socket failed."""
        return self._closing

    def put(self, frame: Frame) -> bool:
        """Queue `frame`; False (dropped) once the queue is closing."""
        if self._closing:
            return False
        self._queue.append(frame)
        self._wakeup.set()
        return True

    def drop(self, unwanted: Callable[[Frame], bool]) -> int:
        """Remove the queued frames `unwanted` picks (not the close); how many went."""
        kept: deque[Frame | _Close] = deque(
            item for item in self._queue if isinstance(item, _Close) or not unwanted(item)
        )
        dropped = len(self._queue) - len(kept)
        self._queue = kept
        if dropped:
            self._wakeup.set()  # a pump pacing the frame at the head looks again
        return dropped

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send what is queued, then close the socket with `code` (the reason cut to fit)."""
        if self._closing:
            return
        self._queue.append(_Close(int(code), close_reason(reason)))
        self._closing = True
        self._wakeup.set()

    def __len__(self) -> int:
        """Frames waiting to be sent."""
        return sum(1 for item in self._queue if not isinstance(item, _Close))

    def frames(self) -> list[Frame]:
        """The frames waiting to be sent, in order (not the close)."""
        return [item for item in self._queue if not isinstance(item, _Close)]

    async def pump(self, socket: OutboundSocket) -> None:
        """Send queued frames in order until the close went out. A socket error ends the
        pump and the queue (later frames are dropped); the caller treats it as a hang-up."""
        try:
            while True:
                while not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                item = self._queue[0]
                if self._pacer is not None and not isinstance(item, _Close):
                    wait = self._pacer.delay(item)
                    if wait > 0:  # woken early by a put or a drop: look again
                        self._wakeup.clear()
                        await wait_or_sleep(self._pacer.clock, self._wakeup, wait)
                        continue
                self._queue.popleft()
                if isinstance(item, bytes):
                    await socket.send_bytes(item)
                    self.bytes_sent += len(item)
                elif isinstance(item, str):
                    await socket.send_text(item)
                else:
                    await socket.close(item.code, item.reason)
                    return
                self.frames_sent += 1
                if self._pacer is not None:
                    self._pacer.sent(item)
        finally:
            self._closing = True
            self._queue.clear()
