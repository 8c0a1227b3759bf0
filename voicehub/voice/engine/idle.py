"""A caller who goes quiet: the agent checks in, and in the end says goodbye.

`CallIdle` watches one call's `VoiceActivity` on the hub's clock. After `prompt_after` seconds
of mutual silence (nobody speaking, nothing being said or prepared) the agent checks in,
naming the work still running for the caller ("I'm still working on heat pumps.") or asking
whether they are still there; it checks in again after each further `prompt_after`. Once the
caller has said nothing for `hang_up_after` seconds the agent says goodbye and ends the call;
results not spoken yet stay held for the caller's next call, as after any hang-up. Either
figure at 0 turns that step off.

While a question of `ask_user` waits for its answer the call is not idle (a reply runs);
the asker says the question again after the same `prompt_after` of the caller's silence
(`question_reminder`, `reminder_due`: see `voicehub.desks.voice_asker`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from voicehub.core.clock import Clock, wait_or_sleep
from voicehub.voice.activity import VoiceActivity

__all__ = ["CallIdle", "check_in_line", "goodbye_line", "question_reminder", "reminder_due"]

log = logging.getLogger("voicehub.voice")


def check_in_line(pending: list[str]) -> str:
    """What the agent says to a quiet caller, given the topics still being worked on."""
    if not pending:
        return "Are you still there? I'm here if you need anything."
    topics = " and ".join(dict.fromkeys(pending))
    return f"I'm still working on {topics}. I'll tell you as soon as it's ready."


def goodbye_line(pending: list[str]) -> str:
    """What the agent says before it ends a call the caller left silent."""
    if pending:
        return (
            "I haven't heard from you, so I'll end the call now. Your results will be "
            "waiting when you call back. Goodbye."
        )
    return "I haven't heard from you, so I'll end the call now. Goodbye."


def question_reminder(question: str) -> str:
    """What the agent says to a caller silent after its question: the question again."""
    return f"Are you still there? {question}"


def reminder_due(
    *, said_at: float, voiced_at: float | None, speaking: bool, after: float
) -> float | None:
    """When an open question is next said again to a silent caller: `after` seconds past
    the later of its last saying and the caller's last voice; None while the caller speaks
    (an answer is coming), or when `after` is 0 (the desk's idle prompt is off)."""
    if after <= 0 or speaking:
        return None
    return max(said_at, voiced_at if voiced_at is not None else said_at) + after


class CallIdle:
    """Checks in on a quiet caller and ends a call they left (see the module docstring).

    `pending()` gives the topics of the caller's work still running; `say(text)` speaks a
    line (returning once played or cut); `end_call(reason)` hangs up.
    """

    def __init__(
        self,
        activity: VoiceActivity,
        clock: Clock,
        *,
        prompt_after: float,
        hang_up_after: float,
        pending: Callable[[], Awaitable[list[str]]],
        say: Callable[[str], Awaitable[object]],
        end_call: Callable[[str], Awaitable[None]],
    ) -> None:
        self.activity, self.clock = activity, clock
        self.prompt_after, self.hang_up_after = prompt_after, hang_up_after
        self._pending, self._say, self._end_call = pending, say, end_call
        self.check_ins = 0

    async def run(self) -> None:
        """Watch the call until it ends (a task of the session)."""
        if self.prompt_after <= 0 and self.hang_up_after <= 0:
            return
        heard_at = self.clock.now()  # the caller's latest sign of life
        last_word = heard_at  # the latest thing anyone said (a check-in too)
        was_speaking = False
        while True:
            snapshot = self.activity.snapshot()
            voiced = snapshot.caller_voiced_at
            if snapshot.user_speaking or was_speaking:  # speaking, or just stopped
                heard_at = self.clock.now()
            if voiced is not None and voiced > heard_at:
                heard_at = voiced
            last_word = max(last_word, heard_at)
            was_speaking = snapshot.user_speaking
            if not snapshot.is_idle:
                await self.activity.wait_for_change(snapshot.version)
                last_word = max(last_word, self.clock.now())
                continue
            idle_since = max(snapshot.idle_since or 0.0, last_word)
            due = self._next_due(idle_since, heard_at)
            if due is None:
                await self.activity.wait_for_change(snapshot.version)
                continue
            changed = asyncio.Event()
            watcher = asyncio.ensure_future(self._changed(snapshot.version, changed))
            try:
                await wait_or_sleep(self.clock, changed, max(0.0, due - self.clock.now()))
            finally:
                watcher.cancel()
            if changed.is_set():
                continue
            now = self.clock.now()
            if self.hang_up_after > 0 and now >= heard_at + self.hang_up_after:
                await self._goodbye()
                return
            if self.prompt_after > 0 and now >= idle_since + self.prompt_after:
                await self._check_in()
                last_word = self.clock.now()

    def _next_due(self, idle_since: float, heard_at: float) -> float | None:
        times = []
        if self.prompt_after > 0:
            times.append(idle_since + self.prompt_after)
        if self.hang_up_after > 0:
            times.append(heard_at + self.hang_up_after)
        return min(times) if times else None

    async def _changed(self, version: int, changed: asyncio.Event) -> None:
        await self.activity.wait_for_change(version)
        changed.set()

    async def _check_in(self) -> None:
        self.check_ins += 1
        try:
            await self._say(check_in_line(await self._pending()))
        except Exception:
            log.exception("could not check in on a quiet caller")

    async def _goodbye(self) -> None:
        try:
            await self._say(goodbye_line(await self._pending()))
        except Exception:
            log.exception("could not say goodbye to a quiet caller")
        await self._end_call("the caller was silent")
