"""The offer dialogue: a small pure machine beside the turn engine.

A result the caller cut off again and again is offered, not spoken: the agent asks
(`question(task)`: "I have the results on heat pumps, shall I read them?") and the caller's
next turn is the answer. `OfferDialogue` is one such offer, from the moment the question
played out (`now`), through these phases:

- **waiting** for the answer until `deadline` (`answer_timeout` after the question);
- **accepted**: a turn said yes (`is_yes`: "yes", "sure", "go ahead", ...): read it now;
- **declined**: a turn said anything else, the deadline passed (`expire`), or the call
  ended (`close`): the result stays held.

A caller turn (`answer(text, spoken, voiced_at, now)`) is the answer only while the offer
waits, before its deadline, and, for a spoken turn, only if the caller's voice was heard
after the question played out (`voiced_at`): a turn finished late may hold words said
before it, which answer nothing. Typed turns (keys pressed) have no voice to check. The
same inputs give the same phases; nothing here reads a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ANSWER_TIMEOUT",
    "AnswerVerdict",
    "OfferDialogue",
    "OfferPhase",
    "is_yes",
    "question",
]

ANSWER_TIMEOUT = 8.0
"""Seconds the offer waits for the caller's answer once its question played out."""

OfferPhase = Literal["waiting", "accepted", "declined"]
AnswerVerdict = Literal["answer", "closed", "late", "earlier audio"]
"""What a caller turn was to the offer: its `answer`; or not, because the offer is no longer
waiting (`closed`), its deadline passed (`late`), or the turn's voice came before the
question ended (`earlier audio`)."""

_YES = re.compile(r"\b(yes|yeah|yep|sure|okay|ok|please|go ahead|read|of course)\b", re.I)

_MOVES: dict[OfferPhase, frozenset[OfferPhase]] = {
    "waiting": frozenset({"accepted", "declined"}),
    "accepted": frozenset(),
    "declined": frozenset(),
}


def is_yes(text: str) -> bool:
    """Whether a caller's answer to the offer says to read the result."""
    return _YES.search(text) is not None


def question(task: object) -> str:
    """What the agent asks to offer the result of `task` (the delivery's `task` metadata)."""
    if isinstance(task, str) and task:
        return f"I have the results on {task}, shall I read them?"
    return "I have the research results, shall I read them?"


@dataclass(slots=True)
class OfferDialogue:
    """One offer, asked at `asked_at` (see the module)."""

    asked_at: float
    answer_timeout: float = ANSWER_TIMEOUT
    phase: OfferPhase = "waiting"
    reply: str | None = None  # the caller's answer, once taken

    def __post_init__(self) -> None:
        if self.answer_timeout <= 0:
            raise ValueError(f"answer_timeout must be positive, got {self.answer_timeout}")

    @property
    def deadline(self) -> float:
        return self.asked_at + self.answer_timeout

    @property
    def waiting(self) -> bool:
        return self.phase == "waiting"

    @property
    def accepted(self) -> bool:
        return self.phase == "accepted"

    def answer(
        self, text: str, *, spoken: bool, voiced_at: float | None, now: float
    ) -> AnswerVerdict:
        """A caller turn: whether it is the offer's answer (then the model must not reply
        to it), and the phase it leads to."""
        if not self.waiting:
            return "closed"
        if now >= self.deadline:
            self._move("declined")
            return "late"
        if spoken and (voiced_at is None or voiced_at < self.asked_at):
            return "earlier audio"
        self.reply = text
        self._move("accepted" if is_yes(text) else "declined")
        return "answer"

    def expire(self, now: float) -> bool:
        """The driver's wait ended at `now`: past the deadline, a waiting offer is declined.
        True if the offer is over."""
        if self.waiting and now >= self.deadline:
            self._move("declined")
        return not self.waiting

    def close(self) -> None:
        """The call ended: a waiting offer is declined."""
        if self.waiting:
            self._move("declined")

    def _move(self, to: OfferPhase) -> None:
        if to not in _MOVES[self.phase]:
            raise RuntimeError(f"the offer cannot go from {self.phase} to {to}")
        self.phase = to
