"""What the turn engine tells its driver to do: plain values, one class per decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "AskEndOfTurn",
    "CallerTurnCommitted",
    "CallerTurnDropped",
    "CallerTurnStarted",
    "CallerWentQuiet",
    "Decision",
    "FlushRecognizer",
    "InterruptAgent",
    "YieldDelivery",
]


@dataclass(frozen=True, slots=True)
class CallerTurnStarted:
    """The caller began a new turn (their first speech since the last turn ended)."""

    turn: int


@dataclass(frozen=True, slots=True)
class CallerWentQuiet:
    """The caller stopped speaking; the turn is not committed yet (it may go on)."""

    turn: int


@dataclass(frozen=True, slots=True)
class FlushRecognizer:
    """Ask the recognizer to finalize what it heard so far (the VAD heard the speech end)."""

    turn: int


@dataclass(frozen=True, slots=True)
class AskEndOfTurn:
    """Ask the end-of-turn model whether the caller's utterance is complete; answer with
    `TurnEngine.end_of_turn(turn, probability, now)`."""

    turn: int


@dataclass(frozen=True, slots=True)
class CallerTurnCommitted:
    """The caller's turn is over: answer it.

    `text` is the whole turn (every final heard, with the words of an earlier turn whose
    reply had not been heard yet when `continues` names that turn: the reply to it must be
    cancelled and this one answers both). `speech_ended_at` is the clock time of the end
    of the caller's speech (None for a typed turn); `final_at` when the recognizer's last
    final arrived.
    """

    turn: int
    text: str
    spoken: bool
    speech_ended_at: float | None
    final_at: float | None
    committed_at: float
    continues: int | None = None


@dataclass(frozen=True, slots=True)
class CallerTurnDropped:
    """The caller's sound had no words (noise, a cough): nothing to answer."""

    turn: int


@dataclass(frozen=True, slots=True)
class InterruptAgent:
    """Stop the agent's interruptible speech now (the caller took the floor)."""

    reason: str


@dataclass(frozen=True, slots=True)
class YieldDelivery:
    """Stop the result being spoken now: the caller's voice comes first."""


Decision: TypeAlias = (
    CallerTurnStarted
    | CallerWentQuiet
    | FlushRecognizer
    | AskEndOfTurn
    | CallerTurnCommitted
    | CallerTurnDropped
    | InterruptAgent
    | YieldDelivery
)
