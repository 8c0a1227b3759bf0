"""The pure delivery policy: strategy values, parsing, persistence, and decide() tables."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from voicehub.delivery.policy import (
    VOICE_HOLD,
    Action,
    Deliver,
    DeliveryStrategy,
    Immediate,
    PendingItem,
    Queued,
    WaitForChange,
    WaitForIdle,
    WakeAt,
    decide,
    parse_strategy,
    strategy_from_json,
)
from voicehub.voice.activity import ActivitySnapshot, VoiceActivity


@dataclass
class State:
    """A hand-written activity state (the policy only reads these five fields)."""

    user_speaking: bool = False
    is_idle: bool = True
    idle_since: float | None = 0.0
    session_live: bool = True
    caller_voiced_at: float | None = None


IDLE_SINCE_0 = State()
USER_TALKING = State(user_speaking=True, is_idle=False, idle_since=None)
AGENT_BUSY = State(is_idle=False, idle_since=None)  # agent speaking/thinking, caller quiet
HELD = State(session_live=False)


def idle_since(t: float) -> State:
    return State(idle_since=t)


def item(delivery_id: str, arrived_at: float, strategy: DeliveryStrategy) -> PendingItem:
    return PendingItem(delivery_id, arrived_at, strategy)


# -- strategy values ---------------------------------------------------------------------


def test_strategies_are_hashable_values_with_documented_defaults() -> None:
    assert WaitForIdle() == WaitForIdle(1.0, None)
    assert Queued() == Queued(2.0)
    assert WaitForIdle(1) == WaitForIdle(1.0) and isinstance(WaitForIdle(1).buffer, float)
    assert len({Immediate(), Immediate(), WaitForIdle(), WaitForIdle(1.0), Queued()}) == 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: WaitForIdle(-1.0),
        lambda: WaitForIdle(float("nan")),
        lambda: WaitForIdle(1.0, max_wait=-2),
        lambda: WaitForIdle(True),
        lambda: Queued(float("inf")),
        lambda: Queued("2"),  # type: ignore[arg-type]
    ],
)
def test_bad_parameters_are_rejected_with_the_field_named(make: object) -> None:
    with pytest.raises(ValueError, match=r"(WaitForIdle|Queued)\.(buffer|max_wait)"):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("immediate", Immediate()),
        ("wait_for_idle", WaitForIdle()),
        (" Queued ", Queued()),
        (None, WaitForIdle()),
        (Queued(0.5), Queued(0.5)),
    ],
)
def test_parse_strategy(value: DeliveryStrategy | str | None, expected: DeliveryStrategy) -> None:
    assert parse_strategy(value) == expected


def test_parse_strategy_default_and_bad_values() -> None:
    assert parse_strategy(None, Immediate()) == Immediate()
    with pytest.raises(ValueError) as caught:
        parse_strategy("wait-for-idle")
    message = str(caught.value)
    assert "'wait-for-idle'" in message
    assert all(name in message for name in ("'immediate'", "'wait_for_idle'", "'queued'"))
    with pytest.raises(ValueError, match="42"):
        parse_strategy(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "strategy", [Immediate(), WaitForIdle(), WaitForIdle(0.5, 10.0), Queued(), Queued(0.0)]
)
def test_json_round_trip(strategy: DeliveryStrategy) -> None:
    data = strategy.to_json()
    assert strategy_from_json(data) == strategy
    assert strategy_from_json(json.dumps(data)) == strategy


def test_from_json_defaults_and_errors() -> None:
    assert strategy_from_json({"kind": "queued"}) == Queued()
    assert strategy_from_json('{"kind": "wait_for_idle", "buffer": 3}') == WaitForIdle(3.0)
    with pytest.raises(ValueError, match="'later'"):
        strategy_from_json({"kind": "later"})
    with pytest.raises(ValueError, match="max_wait"):
        strategy_from_json({"kind": "queued", "max_wait": 1})
    with pytest.raises(ValueError, match=r"WaitForIdle\.buffer"):
        strategy_from_json({"kind": "wait_for_idle", "buffer": "soon"})
    with pytest.raises(ValueError, match="not valid JSON"):
        strategy_from_json("{kind")
    with pytest.raises(ValueError, match="must be an object"):
        strategy_from_json("[1]")


# -- decide tables -----------------------------------------------------------------------

A_IMM = item("a", 5.0, Immediate())
A_WFI = item("a", 5.0, WaitForIdle(1.0))
A_WFI_MAX = item("a", 5.0, WaitForIdle(3.0, max_wait=2.0))


@pytest.mark.parametrize(
    ("state", "pending", "now", "expected"),
    [
        # nothing pending
        (IDLE_SINCE_0, [], 5.0, WaitForChange()),
        # Immediate: as soon as the caller is quiet, even over the agent
        (IDLE_SINCE_0, [A_IMM], 5.0, Deliver((A_IMM,))),
        (AGENT_BUSY, [A_IMM], 5.0, Deliver((A_IMM,))),
        (USER_TALKING, [A_IMM], 5.0, WaitForChange()),
        # held while no session is live, whatever the strategy
        (HELD, [A_IMM], 5.0, WaitForChange()),
        (HELD, [A_WFI], 50.0, WaitForChange()),
        # WaitForIdle: buffer of continuous idle, counted from idle_since
        (IDLE_SINCE_0, [A_WFI], 5.0, Deliver((A_WFI,))),  # idle long before arrival
        (idle_since(4.5), [A_WFI], 5.0, WakeAt(5.5)),
        (idle_since(4.5), [A_WFI], 5.5, Deliver((A_WFI,))),  # exactly the buffer
        (AGENT_BUSY, [A_WFI], 5.0, WaitForChange()),
        # speech resumed inside the buffer: idle_since moved, the wait starts over
        (idle_since(5.3), [A_WFI], 5.5, WakeAt(6.3)),
        # max_wait: waives the buffer at the next idle instant, never over anyone
        (idle_since(6.0), [A_WFI_MAX], 6.5, WakeAt(7.0)),  # arrival + max_wait < idle + buffer
        (idle_since(6.9), [A_WFI_MAX], 7.0, Deliver((A_WFI_MAX,))),  # expired, room idle
        (USER_TALKING, [A_WFI_MAX], 60.0, WaitForChange()),  # expired, caller talking
        (AGENT_BUSY, [A_WFI_MAX], 60.0, WaitForChange()),  # expired, agent talking
        (idle_since(60.0), [A_WFI_MAX], 60.0, Deliver((A_WFI_MAX,))),  # the first gap
        # WaitForIdle with a zero buffer goes at the first idle instant
        (idle_since(5.0), [item("z", 5.0, WaitForIdle(0.0))], 5.0, None),
    ],
)
def test_decide_single_item(
    state: State, pending: list[PendingItem], now: float, expected: Action | None
) -> None:
    if expected is None:
        expected = Deliver(tuple(pending))
    assert decide(state, pending, now) == expected


def test_queued_three_results_half_a_second_apart_become_one_batch() -> None:
    strategy = Queued(1.0)
    first, second, third = (
        item("1", 0.0, strategy),
        item("2", 0.5, strategy),
        item("3", 1.0, strategy),
    )
    pending = [third, first, second]  # order of pending does not matter
    room = idle_since(0.0)
    assert decide(room, [first], 0.5) == WakeAt(1.0)
    assert decide(room, [first, second], 1.0) == WakeAt(1.5)
    assert decide(room, pending, 1.2) == WakeAt(2.0)  # open until 1 s after the last
    assert decide(room, pending, 2.0) == Deliver((first, second, third))
    # closed while the agent talks: spoken as one at the next idle, with no extra buffer
    assert decide(AGENT_BUSY, pending, 2.0) == WaitForChange()
    assert decide(idle_since(9.0), pending, 9.0) == Deliver((first, second, third))
    assert decide(USER_TALKING, pending, 9.0) == WaitForChange()


def test_queued_gap_of_a_full_buffer_starts_a_new_batch() -> None:
    strategy = Queued(1.0)
    a, b, c = item("a", 0.0, strategy), item("b", 1.0, strategy), item("c", 1.5, strategy)
    assert decide(idle_since(0.0), [c, b, a], 3.0) == Deliver((a,))
    assert decide(idle_since(0.0), [c, b], 3.0) == Deliver((b, c))


def test_queued_batch_window_is_the_latest_member_deadline() -> None:
    long_wait = item("a", 0.0, Queued(5.0))
    short = item("b", 1.0, Queued(0.5))
    late = item("c", 4.0, Queued(0.5))  # still inside a's 5 s window
    pending = [long_wait, short, late]
    assert decide(idle_since(0.0), pending, 4.2) == WakeAt(5.0)
    assert decide(idle_since(0.0), pending, 5.0) == Deliver((long_wait, short, late))


def test_mixed_strategies_pick_the_oldest_ready_item() -> None:
    old_wfi = item("w", 1.0, WaitForIdle(5.0))
    new_imm = item("i", 2.0, Immediate())
    queued = item("q", 0.0, Queued(0.5))
    room = idle_since(2.0)
    # the Queued batch (arrived first, closed at 0.5) and the Immediate item are ready
    assert decide(room, [old_wfi, new_imm, queued], 2.0) == Deliver((queued,))
    assert decide(room, [old_wfi, new_imm], 2.0) == Deliver((new_imm,))
    # nothing ready: wake at the earliest ready time
    assert decide(room, [old_wfi, item("q2", 2.0, Queued(2.0))], 2.0) == WakeAt(4.0)
    assert decide(room, [old_wfi], 4.0) == WakeAt(7.0)
    # the agent is talking: only Immediate can go; the rest waits for a change
    assert decide(AGENT_BUSY, [old_wfi, queued, new_imm], 3.0) == Deliver((new_imm,))
    assert decide(AGENT_BUSY, [old_wfi, queued], 3.0) == WaitForChange()


def test_wait_for_idle_goes_one_at_a_time_oldest_first() -> None:
    a, b = item("a", 1.0, WaitForIdle(1.0)), item("b", 2.0, WaitForIdle(1.0))
    assert decide(idle_since(0.0), [b, a], 3.0) == Deliver((a,))
    # after a's speech the room is busy, then idle again: b waits a fresh buffer
    assert decide(idle_since(8.0), [b], 8.5) == WakeAt(9.0)


def test_ties_break_by_delivery_id_and_duplicates_are_dropped() -> None:
    x, y = item("x", 1.0, Immediate()), item("y", 1.0, Immediate())
    assert decide(IDLE_SINCE_0, [y, x], 1.0) == Deliver((x,))
    q = item("q", 1.0, Queued(0.5))
    assert decide(IDLE_SINCE_0, [q, q], 2.0) == Deliver((q,))


def test_wake_time_is_always_in_the_future() -> None:
    # idle_since ahead of now (a clock hiccup) still gives a later wake time, never a spin
    assert decide(idle_since(10.0), [A_WFI], 9.0) == WakeAt(11.0)


def test_real_snapshots_satisfy_the_policy_protocol() -> None:
    class Clock:
        time = 0.0

        def now(self) -> float:
            return self.time

        async def sleep(self, seconds: float) -> None:  # pragma: no cover
            raise AssertionError

    clock = Clock()
    activity = VoiceActivity(clock, session_live=True)
    pending = [item("a", 0.0, WaitForIdle(1.0))]
    activity.agent_speech_started("s")
    activity.agent_speech_finished("s", interrupted=False)
    clock.time = 2.0
    # playout not yet confirmed: not idle, so nothing waiting for idle goes
    snapshot: ActivitySnapshot = activity.snapshot()
    assert decide(snapshot, pending, 2.0) == WaitForChange()
    activity.playout_confirmed("s")
    assert decide(activity.snapshot(), pending, 2.0) == WakeAt(3.0)
    assert decide(activity.snapshot(), pending, 3.0) == Deliver(tuple(pending))
    activity.session_detached()
    assert decide(activity.snapshot(), pending, 30.0) == WaitForChange()


# -- per-frame speech evidence (issue 15) --------------------------------------------------


@pytest.mark.parametrize("frames_before", [1, 2, 5])
def test_a_voiced_frame_just_before_the_decision_holds_every_strategy(frames_before: int) -> None:
    # idle since 0: WaitForIdle(1.0) would go at 1.0, but the caller's first frame came
    # `frames_before` frames earlier and the debounced state has not caught up
    voiced_at = 1.0 - 0.02 * frames_before
    room = State(idle_since=0.0, caller_voiced_at=voiced_at)
    wfi = item("w", 0.0, WaitForIdle(1.0))
    assert decide(room, [wfi], 1.0) == WakeAt(voiced_at + 1.0)  # a fresh gap after it
    now_ = item("i", 0.0, Immediate())
    assert decide(room, [now_], 1.0) == WakeAt(voiced_at + VOICE_HOLD)
    batch = item("q", 0.0, Queued(0.5))
    assert decide(room, [batch], 1.0) == WakeAt(voiced_at + VOICE_HOLD)
    capped = item("m", 0.0, WaitForIdle(5.0, max_wait=0.5))  # max_wait passed: still held
    assert decide(room, [capped], 1.0) == WakeAt(voiced_at + VOICE_HOLD)


def test_old_voice_changes_nothing_and_a_wake_time_tests_ready() -> None:
    wfi = item("w", 0.0, WaitForIdle(1.0))
    room = State(idle_since=2.0, caller_voiced_at=1.5)  # voice before the gap began
    assert decide(room, [wfi], 3.0) == Deliver((wfi,))
    room = State(idle_since=2.0, caller_voiced_at=2.5)  # a cough inside the buffer
    action = decide(room, [wfi], 3.0)
    assert action == WakeAt(3.5)
    assert decide(room, [wfi], action.time) == Deliver((wfi,))
