"""A livekit STT stream that handles each pushed frame in `push_frame` itself.

livekit's `RecognizeStream` queues every pushed frame (and flush) in its input channel, and
the stream's own task wakes to take it: a task wake-up per 20 ms frame per call, for
recognizers that do their work inline anyway (PocketSphinx holds the GIL while it decodes;
a frame of silence costs its gate a few microseconds). :class:`InlineRecognizeStream`
hands an item to the subclass's `_take` from `push_frame` (or `flush`) directly; only an
item that cannot be handled now (the subclass must await something first, or earlier items
still wait) queues, in order, for the task, which hands it to `_take_queued`. The events,
the metrics task and closing are livekit's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeAlias, TypeVar

from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.utils import aio

__all__ = ["InlineRecognizeStream", "InputItem"]

log = logging.getLogger("voicehub.voice")

InputItem: TypeAlias = "rtc.AudioFrame | stt.RecognizeStream._FlushSentinel"

T = TypeVar("T")


class DirectChan(aio.Chan[T], Generic[T]):
    """A channel whose items go to `push` while nothing is queued in it (`push` returns
    False when it cannot take one now); otherwise they queue, in order, for its reader."""

    def __init__(self, push: Callable[[T], bool]) -> None:
        super().__init__()
        self._push = push
        self.direct = 0  # items pushed straight through (for tests and figures)
        self.queued = 0  # items left to livekit's reading task

    def send_nowait(self, value: T) -> None:
        if self.empty() and self._push(value):
            self.direct += 1
            return
        self.enqueue(value)

    def enqueue(self, value: T) -> None:
        """Queue `value` for the reader, behind anything queued (never pushed)."""
        super().send_nowait(value)
        self.queued += 1


class InlineRecognizeStream(stt.RecognizeStream):
    """A `RecognizeStream` whose input is handled where it is pushed (see the module).

    Subclasses implement `_take` (synchronous: handle the item now, or return False to
    queue it) and may override `_take_queued` (the task's side, which may await). An error
    raised while handling an item pushed inline ends the stream as an error raised in
    `_run` does: reported by livekit's retry loop, the stream closed.
    """

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        # livekit's task has not run yet: it reads this channel from its first step
        self._input_ch: DirectChan[Any] = DirectChan(self._take_now)
        self._busy = False  # the task is handling a queued item (it may be awaiting)
        self._error: Exception | None = None

    def _take(self, item: Any) -> bool:
        """Handle `item` now (True), or leave it to the task, queued in order (False)."""
        raise NotImplementedError

    async def _take_queued(self, item: Any) -> None:
        """Handle an item that was queued (on the stream's task)."""
        if not self._take(item):
            raise RuntimeError(f"{type(self).__name__} could not take a queued item")

    def _take_now(self, item: Any) -> bool:
        if self._busy or self._error is not None:
            return False
        try:
            return self._take(item)
        except Exception as error:  # ends the stream from its task, as livekit's would
            self._error = error
            return False

    def _queue(self, item: object) -> None:
        """Queue `item` for the task behind whatever is queued (from `_take`: something to
        await before the next item, e.g. a marker of the subclass's own)."""
        self._input_ch.enqueue(item)

    async def _run(self) -> None:
        async for item in self._input_ch:
            if self._error is not None:
                break
            self._busy = True
            try:
                await self._take_queued(item)
            finally:
                self._busy = False
        if self._error is not None:
            raise self._error
