"""Whether a due tick of the turn engine waits for the providers: pure, on the engine's clock.

A tick decides on the silence after the caller's speech. Two providers may not have caught
up with that silence yet, and `gate(state, hearing, awaiting_final, now, settings)` says
whether the tick goes ahead (`Proceed()`) or waits (`HoldTick(until, reason)`):

- **the VAD** (`reason="vad"`): caller audio it has not analysed yet (more than
  `vad_lag_allowed` of `Hearing.pushed` past `Hearing.analysed`: a burst, or a loaded
  machine) may hold speech, and a turn must not end on a silence nobody has analysed. The
  tick looks again every `vad_poll` (or at the VAD's next event) while the VAD makes
  progress; a VAD whose analysis has not grown for `vad_stall_limit` seconds holds nothing
  (nor does one that never says how far it got: `analysed` None).
- **the recognizer** (`reason="recognizer"`): while the quiet turn awaits its final and the
  recognizer says it still owes finals (`Hearing.finals_owed`: flushes it has not answered,
  a decoder behind on a loaded machine), a turn committed on its interim would be said
  again by its final. The tick waits for them, at most `recognizer_wait_limit` seconds from
  when it first waited; a recognizer that owes nothing leaves `final_timeout` to the engine.

A hold always ends at least a millisecond after `now` (a shorter one could round to no time
on a clock far from zero, and its driver would spin). The same state, hearing and time give
the same verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = [
    "GateSettings",
    "GateState",
    "Hearing",
    "HoldReason",
    "HoldTick",
    "Proceed",
    "TickGate",
    "gate",
]

HoldReason = Literal["vad", "recognizer"]

MIN_HOLD = 0.001
"""A recognizer wait with less than this left is over."""


@dataclass(frozen=True, slots=True)
class Hearing:
    """What the providers have done with the caller's audio, read when a tick is due.

    `pushed`: seconds of caller audio pushed to them; `analysed`: seconds the VAD has
    decided (None: it does not say); `finals_owed`: flushes the recognizer has not answered
    with a final (0 for one that does not say).
    """

    pushed: float
    analysed: float | None
    finals_owed: int = 0

    def __post_init__(self) -> None:
        if self.pushed < 0:
            raise ValueError(f"pushed must not be negative, got {self.pushed}")
        if self.finals_owed < 0:
            raise ValueError(f"finals_owed must not be negative, got {self.finals_owed}")


@dataclass(frozen=True, slots=True)
class GateSettings:
    """How long ticks wait for the providers (seconds; see the module)."""

    vad_lag_allowed: float = 0.1
    vad_stall_limit: float = 5.0
    vad_poll: float = 0.02
    recognizer_wait_limit: float = 15.0

    def __post_init__(self) -> None:
        for name, value in (
            ("vad_lag_allowed", self.vad_lag_allowed),
            ("vad_stall_limit", self.vad_stall_limit),
            ("recognizer_wait_limit", self.recognizer_wait_limit),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.vad_poll < MIN_HOLD:
            raise ValueError(f"vad_poll must be at least {MIN_HOLD} s, got {self.vad_poll}")


@dataclass(frozen=True, slots=True)
class GateState:
    """What the gate remembers: the VAD's furthest analysis and when it was first seen
    (`vad_seen_at` starts at the call's start), and when a tick first waited for a final
    the recognizer owes (None: no such wait)."""

    vad_seen: float = 0.0
    vad_seen_at: float = 0.0
    owed_since: float | None = None


@dataclass(frozen=True, slots=True)
class Proceed:
    """The tick goes ahead."""


@dataclass(frozen=True, slots=True)
class HoldTick:
    """The tick waits until `until` (or an input, or the VAD's progress), then asks again."""

    until: float
    reason: HoldReason


TickGate: TypeAlias = Proceed | HoldTick


def gate(
    state: GateState,
    hearing: Hearing,
    *,
    awaiting_final: bool,
    now: float,
    settings: GateSettings,
) -> tuple[GateState, TickGate]:
    """The gate's verdict on a due tick, and its state after (see the module)."""
    analysed = hearing.analysed
    if analysed is not None:
        if analysed > state.vad_seen:
            state = GateState(analysed, now, state.owed_since)
        stalled = now - state.vad_seen_at > settings.vad_stall_limit
        if hearing.pushed - analysed > settings.vad_lag_allowed and not stalled:
            return state, HoldTick(now + settings.vad_poll, "vad")
    if hearing.finals_owed <= 0 or not awaiting_final:
        if state.owed_since is not None:
            state = GateState(state.vad_seen, state.vad_seen_at, None)
        return state, Proceed()
    since = state.owed_since
    if since is None:
        since = now
        state = GateState(state.vad_seen, state.vad_seen_at, now)
    until = since + settings.recognizer_wait_limit
    if until - now >= MIN_HOLD:
        return state, HoldTick(until, "recognizer")
    return state, Proceed()
