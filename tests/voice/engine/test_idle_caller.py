"""A quiet caller on the hub's virtual clock: checked on after `prompt_after` of mutual
silence (naming the work still running), and the call ended after `hang_up_after` without a
word from them; anything the caller says starts the count again."""

from __future__ import annotations

import asyncio

from voicehub.core.clock import VirtualClock, settle
from voicehub.voice.activity import VoiceActivity
from voicehub.voice.engine.idle import CallIdle, check_in_line, goodbye_line


class Call:
    def __init__(self, clock: VirtualClock, pending: list[str]) -> None:
        self.clock = clock
        self.activity = VoiceActivity(clock, session_live=True)
        self.pending = pending
        self.said: list[tuple[float, str]] = []
        self.ended: list[tuple[float, str]] = []

    async def topics(self) -> list[str]:
        return list(self.pending)

    async def say(self, text: str) -> None:
        self.said.append((self.clock.now(), text))
        self.activity.agent_speech_started(f"s{len(self.said)}")  # speaking takes 2 s
        await self.clock.sleep(2.0)
        self.activity.agent_speech_finished(f"s{len(self.said)}", interrupted=False)
        self.activity.playout_confirmed(f"s{len(self.said)}")

    async def end(self, reason: str) -> None:
        self.ended.append((self.clock.now(), reason))


async def test_a_quiet_caller_is_checked_on_then_the_call_ends() -> None:
    clock = VirtualClock()
    call = Call(clock, ["heat pumps"])
    idle = CallIdle(
        call.activity,
        clock,
        prompt_after=20.0,
        hang_up_after=60.0,
        pending=call.topics,
        say=call.say,
        end_call=call.end,
    )
    watcher = asyncio.create_task(idle.run())
    await settle()
    await clock.advance(19.9)
    assert call.said == []
    await clock.advance(0.1)
    assert call.said == [
        (20.0, "I'm still working on heat pumps. I'll tell you as soon as it's ready.")
    ]
    await clock.advance(22.0)  # 20 s after the check-in ended: again
    assert [at for at, _ in call.said] == [20.0, 42.0]
    call.pending.clear()
    await clock.advance(18.0)  # 60 s without the caller: goodbye, and the call ends
    assert call.said[-1] == (60.0, goodbye_line([]))
    await clock.advance(2.0)
    assert call.ended == [(62.0, "the caller was silent")]
    assert watcher.done()


async def test_the_caller_speaking_starts_the_count_again() -> None:
    clock = VirtualClock()
    call = Call(clock, [])
    idle = CallIdle(
        call.activity,
        clock,
        prompt_after=0.0,  # no check-ins: only the hang-up
        hang_up_after=30.0,
        pending=call.topics,
        say=call.say,
        end_call=call.end,
    )
    watcher = asyncio.create_task(idle.run())
    await settle()
    await clock.advance(25.0)
    call.activity.user_speech_started()
    await clock.advance(3.0)
    call.activity.user_speech_stopped()
    await clock.advance(29.0)  # 29 s after the caller last spoke (at 28): still on
    assert call.said == [] and call.ended == []
    await clock.advance(1.0)
    assert call.said == [(58.0, goodbye_line([]))]
    await clock.advance(2.0)
    assert call.ended and watcher.done()


def test_lines_name_the_work_once() -> None:
    assert check_in_line(["wind", "wind", "solar"]).startswith(
        "I'm still working on wind and solar"
    )
    assert "waiting when you call back" in goodbye_line(["wind"])
    assert check_in_line([]).startswith("Are you still there?")
