"""Waiting for the agent to finish what it is saying before the line changes under it.

A telephony tool (a transfer, keypad tones) answers at once; the agent then tells the caller
what happens ("please hold while I call billing"). The line may change only once that
reply has been heard: the agent has been quiet (not thinking, speaking, with no reply queued
and its last speech confirmed played) for `quiet` seconds, so the gap between a tool's end
and its reply's start does not count as done.
"""

from __future__ import annotations

import asyncio

from voicehub.core.clock import Clock
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity

__all__ = ["agent_busy", "until_agent_quiet"]


def agent_busy(snapshot: ActivitySnapshot) -> bool:
    """Whether the agent is saying (or about to say) something, or it has not played yet."""
    return (
        snapshot.agent_speaking
        or snapshot.agent_thinking
        or snapshot.reply_queued
        or snapshot.playout_pending
    )


async def until_agent_quiet(
    activity: VoiceActivity, clock: Clock, *, quiet: float = 0.5, limit: float = 30.0
) -> bool:
    """Return once the agent has been quiet for `quiet` seconds on `clock` (True), or after
    `limit` seconds whatever it does (False: it was still talking)."""
    deadline = clock.now() + limit
    while (left := deadline - clock.now()) > 0:
        snapshot = activity.snapshot()
        wait = min(quiet, left) if not agent_busy(snapshot) else left
        change = asyncio.ensure_future(activity.wait_for_change(snapshot.version))
        sleeper = asyncio.ensure_future(clock.sleep(wait))
        try:
            await asyncio.wait({change, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
            sleeper.cancel()
        if not change.done() and not agent_busy(snapshot) and wait >= quiet:
            return True
    return False
