"""What the caller hears of the workers' results: one answer, each finding once, and none
of the words agents use among themselves.

Several workers on one task often find the same thing (two analysts reading the same
notes): read out as they came, the caller hears the same paragraph twice. `merge_answers`
keeps each finding once:

- answers are split into sentences; a sentence repeats an earlier one when their words
  are the same, or when at least 80% of the distinct words of the two are shared (both of
  at least four words) and they name the same numbers: the rule is for restated
  passages, not paraphrase, and "costs 5000" never stands for "costs 9000";
- a short opening sentence (at most eight words) of an answer whose next sentence repeats
  an earlier finding goes with it: it introduced the repeated passage ("I checked our
  notes as well.");
- what is left is said in the order the workers were given, one answer per line.

A failed worker's line ("analyst-b timed out: ...") is never merged away: the caller
should know which part is missing.

A loop's draft goes to the reviewers and back; a writer often heads it for them
("Revised draft:", "Reviewed draft.", "**Final draft**"). `without_draft_label` takes
such a heading off before the draft is spoken.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["merge_answers", "without_draft_label"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_WORD = re.compile(r"[a-z0-9']+")
_NEAR = 0.8  # shared distinct words over the words of both (Jaccard)
_MIN_WORDS = 4  # shorter sentences are compared whole ("Yes." is not a finding)
_LEAD_IN_WORDS = 8
_DRAFT_LABEL = re.compile(
    r"""^\s*(?:\#+\s*)?(?:\*\*|__)?\s*
        (?:(?:revised|reviewed|final|new|updated|rough|improved|second|third)\s+)?
        (?:draft|version|revision)(?:\s*(?:\#?\d+|[ivx]+))?
        \s*(?:\*\*|__)?\s*[:.\-\u2013\u2014]+\s*(?:\*\*|__)?\s*""",
    re.IGNORECASE | re.VERBOSE,
)


def merge_answers(answers: Sequence[str], *, keep_whole: Sequence[bool] = ()) -> str:
    """The answers as one text, each finding once (see the module). `keep_whole[i]` true
    keeps answer i untouched (a failure's explanation)."""
    said: list[frozenset[str]] = []
    said_exact: set[tuple[str, ...]] = set()
    lines: list[str] = []
    for index, answer in enumerate(answers):
        if index < len(keep_whole) and keep_whole[index]:
            if answer.strip():
                lines.append(answer.strip())
            continue
        sentences = [s for s in _SENTENCE_END.split(answer.strip()) if s.strip()]
        repeats = [_repeats(s, said, said_exact) for s in sentences]
        kept: list[str] = []
        for position, sentence in enumerate(sentences):
            if repeats[position]:
                continue
            lead_in = position == 0 and len(_words(sentence)) <= _LEAD_IN_WORDS
            if lead_in and len(sentences) > 1 and repeats[1]:
                continue
            kept.append(sentence.strip())
        for sentence in kept:
            words = _words(sentence)
            said.append(frozenset(words))
            said_exact.add(tuple(words))
        if kept:
            lines.append(" ".join(kept))
    return "\n".join(lines)


def without_draft_label(draft: str) -> str:
    """`draft` without a heading addressed to reviewers ("Revised draft:"), if it has one."""
    stripped = _DRAFT_LABEL.sub("", draft, count=1)
    return stripped if stripped.strip() else draft


def _words(sentence: str) -> list[str]:
    return _WORD.findall(sentence.lower())


def _repeats(sentence: str, said: list[frozenset[str]], said_exact: set[tuple[str, ...]]) -> bool:
    words = _words(sentence)
    if not words:
        return False
    if tuple(words) in said_exact:
        return True
    distinct = frozenset(words)
    if len(distinct) < _MIN_WORDS:
        return False
    numbers = {word for word in distinct if any(c.isdigit() for c in word)}
    for earlier in said:
        if len(earlier) < _MIN_WORDS:
            continue
        if numbers != {word for word in earlier if any(c.isdigit() for c in word)}:
            continue
        if len(distinct & earlier) / len(distinct | earlier) >= _NEAR:
            return True
    return False
