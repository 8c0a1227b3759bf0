"""The phone keypad (Twilio `dtmf` events) on a call.

Digits pressed within `digit_gap` seconds of each other make one entry ("1", "42"), given
to the agent as a caller turn in text (`VoiceSession.push_text`): an open ask_user question
takes it as its answer ("press 2 for phone" picks option 2), otherwise the agent answers it
like words. `#` ends an entry at once; `#` and `*` can instead be bound in the desk file
(`[phone.keys]`): `{ text = "..." }` sends that text as the caller's turn, and
`{ action = "repeat" }` speaks the last result delivered in the conversation again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from voicehub.core.clock import Clock
from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import DeliveryStatus

if TYPE_CHECKING:
    from voicehub.core.store.base import Store
    from voicehub.desks.phone import KeyBinding, PhoneConfig
    from voicehub.voice.session import VoiceSession

__all__ = ["Keypad"]

log = logging.getLogger("voicehub.twilio")

_NOTHING_TO_REPEAT = "There is no result to repeat yet."


class Keypad:
    """Turns the key presses of one call into caller turns or desk actions."""

    def __init__(
        self,
        session: VoiceSession,
        config: PhoneConfig,
        store: Store,
        clock: Clock,
    ) -> None:
        self.session, self.config, self.store, self.clock = session, config, store, clock
        self._digits = ""
        self._timer: asyncio.Task[None] | None = None
        self._work = TaskSet(f"room {session.room_id}: key presses", failed=self._failed)

    def press(self, key: str) -> None:
        """One key from a `dtmf` event: 0-9, `*`, `#` (A-D, rare, are ignored)."""
        binding = self.config.keys.get(key)  # type: ignore[call-overload]
        if binding is not None:
            self._flush()
            self._spawn(self._run(binding))
        elif key == "#":
            self._flush()  # the usual "end of entry" key
        elif key.isdigit():
            self._digits += key
            if self._timer is not None:
                self._timer.cancel()
            self._timer = asyncio.create_task(self._after_gap())
        else:
            log.info("room %s: key %r is not bound; ignored", self.session.room_id, key)

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
        await self._work.aclose()

    async def _after_gap(self) -> None:
        await self.clock.sleep(self.config.digit_gap)
        self._timer = None
        self._flush()

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._digits:
            digits, self._digits = self._digits, ""
            self._spawn(self.session.push_text(digits))

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        self._work.start(job, name="key press")

    def _failed(self, error: BaseException) -> None:
        # The call may have ended under the key press: log, the call goes on.
        log.info("room %s: key press not handled: %r", self.session.room_id, error)

    async def _run(self, binding: KeyBinding) -> None:
        if binding.text is not None:
            await self.session.push_text(binding.text)
        elif binding.action == "repeat":
            await self.session.say(await self._last_result())

    async def _last_result(self) -> str:
        delivered = await self.store.list_deliveries(
            room_id=self.session.room_id, statuses=[DeliveryStatus.DELIVERED]
        )
        if not delivered:
            return _NOTHING_TO_REPEAT
        return max(delivered, key=lambda r: (r.updated_at, r.created_at)).content
