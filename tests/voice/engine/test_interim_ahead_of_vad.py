"""A recognizer interim ahead of a VAD that has not analysed its audio yet (issue 38's "laser").

The turn engine and its tick gate alone, on the engine's clock, driven as `CallerTurns.run`
drives them: each due tick is given what the providers did (`Hearing`). A VAD that lags
behind the caller's audio (no start of speech yet, or the speech before ended long ago and
the VAD is behind) while the recognizer's interim arrives, with the agent idle or speaking:
the interim's turn neither commits nor stops the agent on its own while the VAD makes
progress; once the VAD catches up, the turn is the VAD's, one turn with all the words; a
caller voiced over the agent still stops it; a VAD stalled past the gate's stall limit holds
nothing (it is taken for dead: what was heard is committed, never lost)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from voicehub.voice.engine.decisions import (
    CallerTurnCommitted,
    CallerTurnStarted,
    Decision,
    InterruptAgent,
    PauseAgent,
)
from voicehub.voice.engine.tick_gate import GateSettings, Hearing
from voicehub.voice.engine.turn_engine import TurnEngine, TurnEngineSettings, TurnPolicy

SETTINGS = TurnEngineSettings(policy=TurnPolicy("vad", vad_silence=0.65), prepare_replies=False)
GATE = GateSettings()  # 0.1 s lag allowed, 5 s stall limit, 0.02 s poll
FRAME = 0.02


@dataclass
class Providers:
    """The caller's audio as the driver reads it: pushed in real time from `start`, and the
    VAD analysed it up to `vad_at(now)`."""

    vad_at: Callable[[float], float]
    start: float = 0.0
    finals_owed: int = 0

    def hearing(self, now: float) -> Hearing:
        return Hearing(
            pushed=now - self.start,
            analysed=min(now - self.start, self.vad_at(now)),
            finals_owed=self.finals_owed,
        )


def run_until(engine: TurnEngine, providers: Providers, until: float) -> list[Decision]:
    """Every tick the engine asks for up to `until`, as `CallerTurns.run` gives them."""
    decisions: list[Decision] = []
    for _ in range(100_000):
        wake = engine.next_wake()
        if wake is None or wake > until:
            return decisions
        decisions += engine.tick(wake, providers.hearing(wake))
    raise AssertionError("the engine asked for ticks without end")


def commits(decisions: list[Decision]) -> list[CallerTurnCommitted]:
    return [d for d in decisions if isinstance(d, CallerTurnCommitted)]


def lagging(behind: float, *, stuck_from: float | None = None) -> Callable[[float], float]:
    """A VAD `behind` seconds behind the audio, making progress (or stuck at what it had
    analysed at `stuck_from`)."""

    def vad_at(now: float) -> float:
        if stuck_from is not None and now >= stuck_from:
            return stuck_from - behind
        return now - behind

    return vad_at


AGENT: dict[str, tuple[str | None, bool]] = {
    "idle": (None, True),
    "reply": ("reply", True),
    "say": ("say", True),
    "delivery": ("delivery", True),
}


@pytest.mark.parametrize("agent", list(AGENT))
@pytest.mark.parametrize(
    ("behind", "earlier_turn"),
    [
        (1.0, False),  # no start of speech yet: the VAD is a second behind
        (4.5, False),  # far behind, still making progress
        (3.0, True),  # the speech before ended long ago and the VAD is behind
    ],
)
def test_an_interim_ahead_of_a_lagging_vad_waits_for_it_and_makes_one_turn(
    agent: str, behind: float, earlier_turn: bool
) -> None:
    engine = TurnEngine(SETTINGS, gate=GATE)
    providers = Providers(lagging(0.0))
    if earlier_turn:
        engine.speech_started(0.5)
        engine.transcript("hello", final=False, now=0.8)
        engine.speech_ended(1.5, ended_at=1.2)
        engine.transcript("hello", final=True, now=1.6)
        [first] = commits(run_until(engine, providers, 10.0))
        assert first.text == "hello"
        engine.reply_started(first.turn, first.text)
        engine.reply_heard()
    kind, interruptible = AGENT[agent]
    engine.agent_speaking(kind, interruptible=interruptible)  # type: ignore[arg-type]
    # from 10 s the machine is starved: the VAD falls `behind` while the caller speaks
    # (10.0 to 12.0) and the recognizer, ahead of it, sends an interim
    providers.vad_at = lagging(behind)
    started = engine.transcript("laser", final=False, now=10.4)
    assert CallerTurnStarted in [type(d) for d in started]
    catch_up = 10.4 + behind + 0.6  # the VAD hears the start of the speech then
    held = run_until(engine, providers, catch_up - 0.01)
    assert commits(held) == [], "an interim the VAD has not confirmed committed a turn"
    assert not [d for d in held if isinstance(d, InterruptAgent)], "it stopped the agent"
    assert engine.caller_phase == "quiet"
    # the VAD catches up: the same turn, the caller's; their words go on and end
    assert CallerTurnStarted not in [type(d) for d in engine.speech_started(catch_up)]
    engine.transcript("please research solar", final=False, now=catch_up + 0.2)
    engine.speech_ended(catch_up + 1.6, ended_at=catch_up + 1.2)
    engine.transcript("please research solar panels", final=True, now=catch_up + 1.7)
    providers.vad_at = lagging(0.0)
    [turn] = commits(run_until(engine, providers, catch_up + 10.0))
    assert turn.text == "please research solar panels"
    assert engine.caller_phase == "listening"


@pytest.mark.parametrize("agent", ["reply", "say"])
def test_a_caller_voiced_over_the_agent_still_stops_it_while_the_vad_lags(agent: str) -> None:
    engine = TurnEngine(SETTINGS, gate=GATE)
    providers = Providers(lagging(1.5))
    engine.agent_speaking(agent, interruptible=True)  # type: ignore[arg-type]
    decisions: list[Decision] = []
    now = 10.0
    while now < 10.8:  # 0.8 s of speech-like frames, more than an acknowledgement's voice
        decisions += engine.voiced(now, FRAME)
        now += FRAME
    decisions += engine.transcript("laser please research", final=False, now=10.8)
    assert InterruptAgent in [type(d) for d in decisions]  # a real barge-in, at once
    assert commits(run_until(engine, providers, 12.0)) == []  # the turn waits for the VAD
    engine.speech_started(12.0)
    engine.speech_ended(13.0, ended_at=12.7)
    engine.transcript("please research solar panels", final=True, now=13.1)
    providers.vad_at = lagging(0.0)
    [turn] = commits(run_until(engine, providers, 20.0))
    assert turn.text == "please research solar panels" and turn.answer


def test_a_result_pauses_at_the_first_voiced_frame_while_the_vad_lags() -> None:
    engine = TurnEngine(SETTINGS, gate=GATE)
    engine.agent_speaking("delivery", interruptible=True)
    assert [type(d) for d in engine.voiced(10.0, FRAME)] == [PauseAgent]
    assert commits(engine.transcript("laser", final=False, now=10.3)) == []


@pytest.mark.parametrize("agent", list(AGENT))
def test_an_interim_ahead_of_a_vad_stalled_past_the_limit_is_committed_not_lost(
    agent: str,
) -> None:
    # a VAD whose analysis the gate has not seen grow for its stall limit is taken for dead:
    # the words heard are a turn (as a final it never heard is), late, never lost
    engine = TurnEngine(SETTINGS, gate=GATE)
    providers = Providers(lagging(0.5, stuck_from=10.0))
    kind, interruptible = AGENT[agent]
    engine.agent_speaking(kind, interruptible=interruptible)  # type: ignore[arg-type]
    engine.transcript("please research solar", final=False, now=10.4)
    first_tick = 10.4 + SETTINGS.final_timeout  # the gate first sees the VAD at 9.5 s here
    stalled = first_tick + GATE.vad_stall_limit
    held = run_until(engine, providers, stalled - 0.01)
    assert commits(held) == [] and not [d for d in held if isinstance(d, InterruptAgent)]
    decisions = run_until(engine, providers, stalled + GATE.vad_poll)
    [turn] = commits(decisions)
    assert turn.text == "please research solar"
    assert turn.committed_at == pytest.approx(stalled, abs=GATE.vad_poll)
    # a turn committed over the agent's interruptible speech stops it
    assert (InterruptAgent in [type(d) for d in decisions]) == (kind is not None)
