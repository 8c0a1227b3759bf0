"""The tick gate alone, and the turn engine's ticks held by it: what the VAD analysed and what
the recognizer owes in, a verdict out (no asyncio, no audio, times on the engine's clock)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicehub.voice.engine.decisions import CallerTurnCommitted, Decision
from voicehub.voice.engine.tick_gate import (
    MIN_HOLD,
    GateSettings,
    GateState,
    Hearing,
    HoldTick,
    Proceed,
    TickGate,
    gate,
)
from voicehub.voice.engine.turn_engine import TurnEngine, TurnEngineSettings, TurnPolicy

GATE = GateSettings()  # 0.1 s lag allowed, 5 s stall, 0.02 s poll, 15 s recognizer wait


def verdict(
    hearing: Hearing, *, now: float, awaiting_final: bool = True, state: GateState | None = None
) -> TickGate:
    return gate(
        state or GateState(), hearing, awaiting_final=awaiting_final, now=now, settings=GATE
    )[1]


@pytest.mark.parametrize(
    ("hearing", "now", "awaiting_final", "state", "expected"),
    [
        # the VAD caught up (within the lag allowed) and nothing is owed
        (Hearing(3.0, 3.0), 3.0, True, GateState(), Proceed()),
        (Hearing(3.0, 2.91), 3.0, True, GateState(), Proceed()),
        # the VAD runs behind the audio pushed: look again at the next poll
        (Hearing(3.0, 2.5), 3.0, False, GateState(), HoldTick(3.02, "vad")),
        # ... unless its analysis has not grown for the stall limit: it holds nothing
        (Hearing(9.0, 2.5), 9.0, False, GateState(2.5, 3.9), Proceed()),
        (Hearing(9.0, 2.5), 8.9, False, GateState(2.5, 3.9), HoldTick(8.92, "vad")),
        # a VAD that never grew from the call's start stalls from the start
        (Hearing(6.0, 0.0), 6.0, False, GateState(0.0, 0.5), Proceed()),
        # a VAD that does not say how far it got holds nothing
        (Hearing(3.0, None), 3.0, False, GateState(), Proceed()),
        # the recognizer owes a final of the quiet turn: wait for it, at most the limit
        (Hearing(3.0, 3.0, 1), 3.0, True, GateState(), HoldTick(18.0, "recognizer")),
        (Hearing(3.0, 3.0, 1), 10.0, True, GateState(3.0, 3.0, 2.0), HoldTick(17.0, "recognizer")),
        (Hearing(3.0, 3.0, 1), 17.0, True, GateState(3.0, 3.0, 2.0), Proceed()),
        # less than a millisecond left is over (sleeping it could round to no time)
        (Hearing(3.0, 3.0, 2), 16.9995, True, GateState(3.0, 3.0, 2.0), Proceed()),
        # owed finals the turn does not wait for (it is speaking, or settled) hold nothing
        (Hearing(3.0, 3.0, 1), 3.0, False, GateState(), Proceed()),
        # the VAD is asked first: a lagging VAD holds even when finals are owed
        (Hearing(3.0, 2.0, 1), 3.0, True, GateState(), HoldTick(3.02, "vad")),
    ],
)
def test_the_gate_decides_on_what_the_providers_did(
    hearing: Hearing, now: float, awaiting_final: bool, state: GateState, expected: TickGate
) -> None:
    got = verdict(hearing, now=now, awaiting_final=awaiting_final, state=state)
    if isinstance(expected, HoldTick):
        assert isinstance(got, HoldTick)
        assert (got.until, got.reason) == (pytest.approx(expected.until), expected.reason)
    else:
        assert got == expected


def test_the_gate_remembers_when_the_vad_last_grew_and_when_the_wait_began() -> None:
    state, _ = gate(GateState(), Hearing(2.0, 1.0), awaiting_final=False, now=2.0, settings=GATE)
    assert (state.vad_seen, state.vad_seen_at) == (1.0, 2.0)
    state, _ = gate(state, Hearing(3.0, 1.0), awaiting_final=False, now=3.0, settings=GATE)
    assert state.vad_seen_at == 2.0  # no progress: the stall counts from 2.0
    state, _ = gate(state, Hearing(3.0, 3.0, 1), awaiting_final=True, now=4.0, settings=GATE)
    assert state.owed_since == 4.0
    state, _ = gate(state, Hearing(3.0, 3.0, 0), awaiting_final=True, now=5.0, settings=GATE)
    assert state.owed_since is None  # answered: a later debt waits anew


@pytest.mark.parametrize(
    ("field", "value"),
    [("vad_lag_allowed", -0.1), ("vad_stall_limit", -1.0), ("recognizer_wait_limit", -1.0)],
)
def test_negative_gate_settings_are_refused_by_name(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        GateSettings(**{field: value})


def test_a_poll_too_short_to_sleep_is_refused() -> None:
    with pytest.raises(ValueError, match="vad_poll"):
        GateSettings(vad_poll=0.0)


def test_a_bad_hearing_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="finals_owed"):
        Hearing(1.0, 1.0, -1)
    with pytest.raises(ValueError, match="pushed"):
        Hearing(-1.0, 0.0)


readings = st.tuples(
    st.floats(0.0, 2.0),  # time passing
    st.floats(0.0, 0.5),  # audio pushed meanwhile
    st.floats(0.0, 1.0),  # share of the lag the VAD catches up
    st.integers(0, 2),  # finals owed
    st.booleans(),  # the turn awaits its final
)


@settings(max_examples=300, deadline=None)
@given(st.lists(readings, min_size=1, max_size=60))
def test_no_hold_is_empty_and_no_wait_outlasts_its_limit(
    steps: list[tuple[float, float, float, int, bool]],
) -> None:
    """Whatever the providers do: every hold ends in the future (a driver never spins), the
    VAD holds only while it lags and has grown within the stall limit, and a recognizer
    wait never ends past its limit from when it began."""
    state, now, pushed, analysed = GateState(), 0.0, 0.0, 0.0
    for passing, more, caught_up, owed, awaiting in steps:
        now += passing
        pushed += more
        analysed += (pushed - analysed) * caught_up
        before = state
        state, got = gate(
            state, Hearing(pushed, analysed, owed), awaiting_final=awaiting, now=now, settings=GATE
        )
        if isinstance(got, HoldTick):
            assert got.until - now >= MIN_HOLD - 1e-12
            if got.reason == "vad":
                assert pushed - analysed > GATE.vad_lag_allowed
                assert now - state.vad_seen_at <= GATE.vad_stall_limit
            else:
                assert owed > 0 and awaiting
                assert state.owed_since is not None
                assert got.until <= state.owed_since + GATE.recognizer_wait_limit + 1e-9
                assert before.owed_since in (None, state.owed_since)
        elif owed > 0 and awaiting and pushed - analysed <= GATE.vad_lag_allowed:
            assert state.owed_since is not None  # the wait is over, not forgotten
            assert now - state.owed_since >= GATE.recognizer_wait_limit - MIN_HOLD - 1e-9


# -- the engine's ticks, held by the gate -------------------------------------------------------

VAD = TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65), prepare_replies=False)


def commits(decisions: list[Decision]) -> list[CallerTurnCommitted]:
    return [d for d in decisions if isinstance(d, CallerTurnCommitted)]


def quiet_turn(engine: TurnEngine) -> None:
    engine.speech_started(1.0)
    engine.speech_ended(2.0, ended_at=1.65)
    engine.transcript("please research solar panels", final=True, now=2.05)


def test_a_lagging_vad_holds_the_commit_until_it_caught_up() -> None:
    engine = TurnEngine(VAD, started_at=0.0)
    quiet_turn(engine)
    assert engine.next_wake() == pytest.approx(2.3)
    assert engine.tick(2.3, Hearing(pushed=2.6, analysed=2.3)) == []
    assert engine.held == HoldTick(pytest.approx(2.32), "vad")  # type: ignore[arg-type]
    assert engine.next_wake() == pytest.approx(2.32)
    assert engine.tick(2.32, Hearing(pushed=2.62, analysed=2.4)) == []
    [turn] = commits(engine.tick(2.34, Hearing(pushed=2.64, analysed=2.6)))
    assert turn.committed_at == 2.34 and engine.held is None


def test_a_livekit_vads_event_releases_the_hold_at_once() -> None:
    engine = TurnEngine(VAD)
    quiet_turn(engine)
    engine.tick(2.3, Hearing(pushed=2.6, analysed=2.3))
    assert not engine.release_hold("recognizer")  # it waits for the VAD, not the recognizer
    assert engine.release_hold("vad")
    assert engine.next_wake() == pytest.approx(2.3)  # due again: ask the gate now


def test_a_final_owed_holds_the_timeout_commit_until_it_comes() -> None:
    engine = TurnEngine(TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65)))
    engine.speech_started(1.0)
    engine.transcript("please research", final=False, now=1.5)
    engine.speech_ended(2.0, ended_at=1.65)
    assert engine.next_wake() == 4.0  # final_timeout
    assert engine.tick(4.0, Hearing(4.0, 4.0, finals_owed=1)) == []
    assert engine.held == HoldTick(19.0, "recognizer")
    assert engine.next_wake() == 19.0
    # the final comes: an input, so the hold is lifted and the turn commits whole
    [turn] = commits(engine.transcript("please research solar panels", final=True, now=6.0))
    assert engine.held is None
    assert turn.text == "please research solar panels"


def test_a_final_never_answered_is_waited_for_at_most_the_limit() -> None:
    engine = TurnEngine(TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65)))
    engine.speech_started(1.0)
    engine.transcript("please research", final=False, now=1.5)
    engine.speech_ended(2.0, ended_at=1.65)
    assert engine.tick(4.0, Hearing(4.0, 4.0, finals_owed=1)) == []
    assert engine.tick(18.9, Hearing(18.9, 18.9, finals_owed=1)) == []
    [turn] = commits(engine.tick(19.0, Hearing(19.0, 19.0, finals_owed=1)))
    assert turn.text == "please research"  # what it heard, never lost


def test_a_vad_silent_since_the_call_started_stalls_from_the_start() -> None:
    engine = TurnEngine(VAD, started_at=10.0)
    engine.speech_started(11.0)
    engine.speech_ended(12.0, ended_at=11.65)
    engine.transcript("hello", final=True, now=12.05)
    assert engine.tick(12.3, Hearing(pushed=2.3, analysed=0.0)) == []  # 2.3 s without progress
    assert commits(engine.tick(15.1, Hearing(pushed=5.1, analysed=0.0)))  # over 5 s: stalled
