"""Who holds the floor of a call: the agent's words wait while the caller does.

`CallerFloor` is set by the turn driver after every decision (the engine says whether a
caller turn is open) and awaited by the speech player right before a speech's first frame:
a reply or a say waits while the caller holds the floor, at most `floor_wait` seconds, so
the agent never starts over a caller who went on. A result does not wait: it is held
instead, and offered at the next gap (`ResultSpeaker.hold`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from voicehub.core.clock import wait_or_sleep

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.voice.engine.speech import Speech

__all__ = ["CallerFloor"]


class CallerFloor:
    """One call's floor (see the module docstring)."""

    def __init__(self, clock: Clock, floor_wait: float = 3.0) -> None:
        if floor_wait < 0:
            raise ValueError(f"floor_wait must not be negative, got {floor_wait}")
        self._clock, self._floor_wait = clock, floor_wait
        self._free = asyncio.Event()  # set while the caller does not hold the floor
        self._free.set()

    @property
    def caller_holds(self) -> bool:
        return not self._free.is_set()

    def held_by_caller(self, held: bool) -> None:
        """Whether a caller turn is open now."""
        if held:
            self._free.clear()
        else:
            self._free.set()

    async def wait_for(self, speech: Speech) -> None:
        """Before `speech`'s first frame: wait while the caller holds the floor (not a
        result; see the module docstring)."""
        if speech.kind != "delivery" and not self._free.is_set():
            await wait_or_sleep(self._clock, self._free, self._floor_wait)
