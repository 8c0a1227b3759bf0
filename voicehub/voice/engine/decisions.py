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
    "DropPreparedReply",
    "FlushRecognizer",
    "InterruptAgent",
    "PauseAgent",
    "PrepareReply",
    "ResumeAgent",
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
class PrepareReply:
    """The quiet turn's words are known and it is likely over: the reply to `text` may be
    prepared (model and first sentence) now, to be spoken if the turn commits unchanged."""

    turn: int
    text: str


@dataclass(frozen=True, slots=True)
class DropPreparedReply:
    """The turn went on (or was dropped): the reply prepared for it is stale."""

    turn: int


@dataclass(frozen=True, slots=True)
class CallerTurnCommitted:
    """The caller's turn is over.

    `text` is the whole turn (every final heard, with the words of an earlier turn whose
    reply had not been heard yet when `continues` names that turn: the reply to it must be
    cancelled and this one answers both); `own_text` is this turn's words alone (`text`
    when it continues nothing), the words the caller said since. `speech_ended_at` is the
    clock time of the end of the caller's speech (None for a typed turn); `final_at` when
    the recognizer's last final arrived. `answer` is False for words that only asked the
    agent to stop ("wait", "hold on"): recorded, not answered. `prepared` says the reply
    prepared for this very text (`PrepareReply`) stands.
    """

    turn: int
    text: str
    own_text: str
    spoken: bool
    speech_ended_at: float | None
    final_at: float | None
    committed_at: float
    continues: int | None = None
    answer: bool = True
    prepared: bool = False


@dataclass(frozen=True, slots=True)
class CallerTurnDropped:
    """The caller's sound needs no answer: no words (noise, a cough), or an acknowledgement
    over the agent's speech ("uh-huh")."""

    turn: int


@dataclass(frozen=True, slots=True)
class PauseAgent:
    """The caller spoke over the agent: stop its audio now, keeping the place (what they
    said decides: go on from there, or stop for good)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ResumeAgent:
    """The sound over the agent was an acknowledgement or a noise: go on from where the
    caller stopped hearing it."""

    reason: str


@dataclass(frozen=True, slots=True)
class InterruptAgent:
    """Stop the agent's speech (playing or paused) for good: the caller took the floor."""

    reason: str


Decision: TypeAlias = (
    CallerTurnStarted
    | CallerWentQuiet
    | FlushRecognizer
    | AskEndOfTurn
    | PrepareReply
    | DropPreparedReply
    | CallerTurnCommitted
    | CallerTurnDropped
    | PauseAgent
    | ResumeAgent
    | InterruptAgent
)
