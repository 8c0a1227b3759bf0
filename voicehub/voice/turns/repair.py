"""Hesitation repair: a caller who goes on after their turn was committed.

A turn can still end mid-request (a long pause, the ceiling reached, the model wrong).
If the caller goes on before any of the agent's reply was heard, the reply is cancelled
and the two stretches are one turn: `resumes_turn` says when, `merge_words` joins their
transcripts ("Could you research." + "Heat pumps for me." -> "Could you research heat
pumps for me."). Once the caller heard the reply begin, what they say is a new turn.
"""

from __future__ import annotations

import re

__all__ = ["merge_words", "resumes_turn"]

_SENTENCE_END = re.compile(r"[\s.,;:!?\u2026-]+$")


def resumes_turn(
    *, committed_at: float, resumed_at: float, reply_heard_at: float | None, window: float
) -> bool:
    """Whether caller speech starting at `resumed_at` continues the turn committed at
    `committed_at`: it started within `window` seconds of the commit, and before the first
    audio of the reply reached the caller (`reply_heard_at`, None while none has)."""
    if resumed_at < committed_at or resumed_at - committed_at > window:
        return False
    return reply_heard_at is None or resumed_at < reply_heard_at


def merge_words(first: str, second: str) -> str:
    """The transcript of one turn heard in two stretches: the first's closing punctuation
    dropped, the second's capital lowered (but "I", "I'm" and the like)."""
    head = _SENTENCE_END.sub("", first.strip())
    tail = second.strip()
    if not head:
        return tail
    if not tail:
        return head
    first_word = tail.split()[0]
    if not (first_word == "I" or first_word.startswith("I'")) and not first_word[1:2].isupper():
        tail = tail[:1].lower() + tail[1:]
    return f"{head} {tail}"
