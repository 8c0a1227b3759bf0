"""VoiceActivity: the idle condition, idle_since stamps, versions, waiters, tolerance."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicehub.core.clock import VirtualClock
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity


class ManualClock:
    """A clock whose time is set by the test (sync tests need no event loop)."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - unused here
        raise AssertionError("ManualClock does not sleep")


def live_activity(start: float = 0.0) -> tuple[VoiceActivity, ManualClock]:
    clock = ManualClock(start)
    activity = VoiceActivity(clock, session_live=True)
    return activity, clock


def test_starts_idle_since_construction() -> None:
    clock = ManualClock(5.0)
    activity = VoiceActivity(clock)
    assert activity.is_idle
    assert activity.idle_since == 5.0
    assert not activity.session_live
    assert activity.version == 0
    snap = activity.snapshot()
    assert snap.is_idle and snap.idle_since == 5.0 and snap.version == 0


@pytest.mark.parametrize(
    ("busy", "calm"),
    [
        (lambda a: a.user_speech_started(), lambda a: a.user_speech_stopped()),
        (lambda a: a.agent_thinking_started(), lambda a: a.agent_thinking_finished()),
        (lambda a: a.reply_queued(), lambda a: a.reply_dequeued()),
        (
            lambda a: a.user_turn_awaiting_answer(True),
            lambda a: a.user_turn_awaiting_answer(False),
        ),
    ],
    ids=["user", "thinking", "reply_queued", "awaiting_answer"],
)
def test_each_condition_blocks_idle_and_restamps(
    busy: Callable[[VoiceActivity], None], calm: Callable[[VoiceActivity], None]
) -> None:
    activity, clock = live_activity()
    clock.time = 1.0
    busy(activity)
    assert not activity.is_idle and activity.idle_since is None
    clock.time = 3.5
    calm(activity)
    assert activity.is_idle and activity.idle_since == 3.5


def test_agent_speech_needs_playout_confirmation_not_just_handover() -> None:
    activity, clock = live_activity()
    clock.time = 1.0
    activity.agent_speech_started("s1")
    snap = activity.snapshot()
    assert snap.agent_speaking and snap.playout_pending and not snap.is_idle
    clock.time = 2.0
    activity.agent_speech_finished("s1", interrupted=False)
    snap = activity.snapshot()
    assert not snap.agent_speaking and snap.playout_pending
    assert not snap.is_idle, "audio handed over is not audio played"
    clock.time = 2.7
    activity.playout_confirmed("s1")
    assert activity.is_idle and activity.idle_since == 2.7


def test_playout_confirmed_before_finish_counts() -> None:
    activity, clock = live_activity()
    activity.agent_speech_started("s1")
    clock.time = 1.0
    activity.playout_confirmed("s1")  # the mark raced ahead of the session's event
    assert activity.snapshot().agent_speaking and not activity.is_idle
    clock.time = 1.5
    activity.agent_speech_finished("s1", interrupted=False)
    assert activity.is_idle and activity.idle_since == 1.5


def test_unknown_and_duplicate_transport_events_are_ignored() -> None:
    activity, _ = live_activity()
    version = activity.version
    activity.playout_confirmed("never-started")
    activity.agent_speech_finished("never-started", interrupted=False)
    activity.user_speech_stopped()
    activity.agent_thinking_finished()
    activity.reply_dequeued()
    assert activity.version == version and activity.is_idle

    activity.agent_speech_started("s1")
    activity.agent_speech_finished("s1", interrupted=False)
    v = activity.version
    activity.agent_speech_finished("s1", interrupted=False)  # finished twice
    assert activity.version == v
    activity.playout_confirmed("s1")
    activity.playout_confirmed("s1")  # confirmed twice
    assert activity.is_idle


def test_interrupted_speech_does_not_wait_for_playout() -> None:
    activity, clock = live_activity()
    activity.agent_speech_started("s1")
    clock.time = 0.4
    activity.agent_speech_finished("s1", interrupted=True)
    assert activity.is_idle and activity.idle_since == 0.4
    v = activity.version
    activity.playout_confirmed("s1")  # late mark for flushed audio
    assert activity.version == v


def test_overlapping_speeches_each_need_confirmation() -> None:
    activity, _ = live_activity()
    activity.agent_speech_started("a")
    activity.agent_speech_started("b")
    activity.agent_speech_finished("a", interrupted=False)
    activity.agent_speech_finished("b", interrupted=False)
    activity.playout_confirmed("b")
    assert not activity.is_idle
    activity.playout_confirmed("a")
    assert activity.is_idle


def test_queued_replies_are_counted_and_never_negative() -> None:
    activity, _ = live_activity()
    activity.reply_queued()
    activity.reply_queued()
    activity.reply_dequeued()
    assert activity.snapshot().reply_queued
    activity.reply_dequeued()
    activity.reply_dequeued()
    assert activity.is_idle
    activity.reply_queued()
    assert not activity.is_idle


def test_idle_since_keeps_its_start_while_idle_continues() -> None:
    activity, clock = live_activity()
    clock.time = 10.0
    activity.agent_speech_started("s")  # busy
    activity.agent_speech_finished("s", interrupted=False)
    clock.time = 11.0
    activity.playout_confirmed("s")
    clock.time = 20.0
    activity.user_speech_stopped()  # a no-op while idle
    activity.playout_confirmed("s")
    assert activity.idle_since == 11.0


def test_detach_resets_state_and_attach_starts_a_fresh_idle_period() -> None:
    activity, clock = live_activity()
    activity.user_speech_started()
    activity.agent_thinking_started()
    activity.agent_speech_started("s")
    activity.reply_queued()
    activity.user_turn_awaiting_answer(True)
    clock.time = 4.0
    activity.session_detached()
    snap = activity.snapshot()
    assert not snap.session_live and snap.is_idle and snap.idle_since == 4.0
    assert not (snap.user_speaking or snap.agent_speaking or snap.playout_pending)
    clock.time = 30.0
    activity.playout_confirmed("s")  # forgotten by the detach: ignored
    activity.session_attached()
    snap = activity.snapshot()
    assert snap.session_live and snap.is_idle and snap.idle_since == 30.0
    v = activity.version
    activity.session_attached()  # attached twice: no change
    assert activity.version == v


def test_snapshot_is_frozen_and_cached_per_version() -> None:
    activity, _ = live_activity()
    first = activity.snapshot()
    assert activity.snapshot() is first
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.is_idle = False  # type: ignore[misc]
    activity.user_speech_started()
    second = activity.snapshot()
    assert second is not first and second.version == first.version + 1
    assert "user_speaking=True" in repr(activity)


async def test_wait_for_change_wakes_every_waiter_on_a_change() -> None:
    clock = VirtualClock()
    activity = VoiceActivity(clock, session_live=True)
    start = activity.version
    waiters = [asyncio.create_task(activity.wait_for_change(start)) for _ in range(3)]
    await clock.advance(1.0)
    assert not any(task.done() for task in waiters)
    activity.user_speech_started()
    snaps = await asyncio.gather(*waiters)
    assert all(s.user_speaking and s.version == start + 1 for s in snaps)
    # A change that already happened returns at once with the newest snapshot.
    activity.user_speech_stopped()
    snap = await activity.wait_for_change(start)
    assert snap.version == start + 2 and snap.is_idle and snap.idle_since == 1.0


async def test_wait_for_change_ignores_no_op_events_and_survives_cancellation() -> None:
    clock = VirtualClock()
    activity = VoiceActivity(clock, session_live=True)
    cancelled = asyncio.create_task(activity.wait_for_change(activity.version))
    waiter = asyncio.create_task(activity.wait_for_change(activity.version))
    await clock.advance(0.1)
    cancelled.cancel()
    activity.user_speech_stopped()  # no-op: must not wake anyone
    await clock.advance(0.1)
    assert not waiter.done()
    activity.agent_thinking_started()
    snap = await waiter
    assert snap.agent_thinking


# -- property: random event sequences against a reference model --------------------------

OPS = st.one_of(
    st.sampled_from(
        [
            ("user_speech_started",),
            ("user_speech_stopped",),
            ("agent_thinking_started",),
            ("agent_thinking_finished",),
            ("reply_queued",),
            ("reply_dequeued",),
            ("session_attached",),
            ("session_detached",),
        ]
    ),
    st.tuples(st.just("user_turn_awaiting_answer"), st.booleans()),
    st.tuples(st.just("agent_speech_started"), st.sampled_from("abc")),
    st.tuples(st.just("agent_speech_finished"), st.sampled_from("abc"), st.booleans()),
    st.tuples(st.just("playout_confirmed"), st.sampled_from("abc")),
)


class Reference:
    """The DESIGN.md idle rule, written as plainly as possible."""

    def __init__(self) -> None:
        self.user = self.thinking = self.awaiting = False
        self.live = True
        self.replies = 0
        self.generating: set[str] = set()
        self.unplayed: set[str] = set()

    def apply(self, op: tuple[object, ...]) -> None:
        name, *args = op
        if name == "user_speech_started":
            self.user = True
        elif name == "user_speech_stopped":
            self.user = False
        elif name == "agent_thinking_started":
            self.thinking = True
        elif name == "agent_thinking_finished":
            self.thinking = False
        elif name == "reply_queued":
            self.replies += 1
        elif name == "reply_dequeued":
            self.replies = max(0, self.replies - 1)
        elif name == "user_turn_awaiting_answer":
            self.awaiting = bool(args[0])
        elif name == "agent_speech_started":
            self.generating.add(str(args[0]))
            self.unplayed.add(str(args[0]))
        elif name == "agent_speech_finished":
            self.generating.discard(str(args[0]))
            if args[1]:
                self.unplayed.discard(str(args[0]))
        elif name == "playout_confirmed":
            self.unplayed.discard(str(args[0]))
        elif name == "session_attached":
            self.live = True
        elif name == "session_detached":
            self.user = self.thinking = self.awaiting = self.live = False
            self.replies = 0
            self.generating.clear()
            self.unplayed.clear()

    def idle(self) -> bool:
        return not (
            self.user
            or self.thinking
            or self.awaiting
            or self.replies
            or self.generating
            or self.unplayed
        )


def apply_op(activity: VoiceActivity, op: tuple[object, ...]) -> None:
    name, *args = op
    if name == "agent_speech_finished":
        activity.agent_speech_finished(str(args[0]), interrupted=bool(args[1]))
    else:
        getattr(activity, str(name))(*args)


@settings(derandomize=True, database=None, max_examples=300, deadline=None)
@given(st.lists(st.tuples(OPS, st.integers(0, 3)), max_size=40))
def test_random_event_sequences_match_the_reference(
    ops: list[tuple[tuple[object, ...], int]],
) -> None:
    activity, clock = live_activity()
    reference = Reference()
    previous: ActivitySnapshot = activity.snapshot()
    for op, step in ops:
        clock.time += step * 0.25
        apply_op(activity, op)
        reference.apply(op)
        snap = activity.snapshot()
        assert snap.is_idle == reference.idle(), op
        assert snap.session_live == reference.live
        assert (snap.idle_since is not None) == snap.is_idle
        changed = dataclasses.replace(snap, version=0) != dataclasses.replace(previous, version=0)
        assert snap.version == previous.version + (1 if changed else 0)
        if snap.is_idle and previous.is_idle and snap.session_live == previous.session_live:
            assert snap.idle_since == previous.idle_since, "idle period must not restart"
        if snap.is_idle and not previous.is_idle:
            assert snap.idle_since == clock.time
        previous = snap
