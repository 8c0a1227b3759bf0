"""Admission of delegated tasks: a hub-wide and a per-room limit on running tasks.

Tasks over either limit wait in one first-in, first-out line; when a slot frees up, the
oldest waiting task that fits is admitted (a task of a full room does not hold up others).
Counting is exact, so a task's stored status (queued or running) is always true.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Admission:
    """Slots for running tasks, counted per hub and per room."""

    def __init__(self, max_total: int, max_per_room: int) -> None:
        self.max_total = max_total
        self.max_per_room = max_per_room
        self._total = 0
        self._per_room: dict[str, int] = {}
        self._waiting: deque[tuple[str, asyncio.Event]] = deque()

    def _fits(self, room_id: str) -> bool:
        return self._total < self.max_total and self._per_room.get(room_id, 0) < self.max_per_room

    def _take(self, room_id: str) -> None:
        self._total += 1
        self._per_room[room_id] = self._per_room.get(room_id, 0) + 1

    def try_take(self, room_id: str) -> bool:
        """Take a slot now if one is free and nobody is waiting for it."""
        if self._waiting or not self._fits(room_id):
            return False
        self._take(room_id)
        return True

    async def take(self, room_id: str) -> None:
        """Wait in line for a slot. Cancelling the wait gives up the place (or the slot, if
        it was granted at that very moment)."""
        if self.try_take(room_id):
            return
        granted = asyncio.Event()
        entry = (room_id, granted)
        self._waiting.append(entry)
        try:
            await granted.wait()
        except asyncio.CancelledError:
            if granted.is_set():
                self.release(room_id)
            else:
                self._waiting.remove(entry)
            raise

    def release(self, room_id: str) -> None:
        """Give a slot back and admit whoever now fits, oldest first."""
        self._total -= 1
        left = self._per_room.get(room_id, 1) - 1
        if left > 0:
            self._per_room[room_id] = left
        else:
            self._per_room.pop(room_id, None)
        for entry in list(self._waiting):
            waiting_room, granted = entry
            if self._fits(waiting_room):
                self._waiting.remove(entry)
                self._take(waiting_room)
                granted.set()
