"""The `session.update` events of a call waiting for their answer.

`session.updated` does not echo the client's `event_id`, so updates are answered in the
order they were sent; an `error` naming an update's `event_id` refuses that one.
"""

from __future__ import annotations

import asyncio

from voicehub.errors import VoicehubError

__all__ = ["SessionUpdates"]


class SessionUpdates:
    """Futures of the updates sent and not yet answered, oldest first."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[None]] = {}

    def expect(self, event_id: str) -> asyncio.Future[None]:
        """The future the answer to update `event_id` resolves."""
        future = self._waiting[event_id] = asyncio.get_running_loop().create_future()
        return future

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._waiting

    def answered(self) -> None:
        """A `session.updated`: the oldest waiting update went through."""
        for event_id, future in list(self._waiting.items()):
            del self._waiting[event_id]
            if not future.done():
                future.set_result(None)
                return

    def refused(self, event_id: str, message: str) -> None:
        """An `error` for update `event_id`."""
        future = self._waiting.pop(event_id, None)
        if future is not None and not future.done():
            future.set_exception(VoicehubError(f"the model refused the session update: {message}"))

    def fail_all(self, reason: str) -> None:
        """No answer will come (the connection dropped, the call ended)."""
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(VoicehubError(reason))
