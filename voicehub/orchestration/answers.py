"""Reading a person's answer to a question, typed or spoken (sans-I/O, pure functions).

Speech transcripts have no punctuation or case and use words for numbers ("the second one");
typed answers have both. Everything is compared in a normal form: lower case, no
apostrophes ("don't" -> "dont"), other punctuation turned into spaces.

- yes/no: phrase tables matched longest first ("not sure" is not "sure", "not really" is not
  "really"); when a reply holds both, the last one wins, because people correct themselves
  ("yes, no wait, no") and "yeah, no" means no.
- options: an exact label, then labels named in the reply, then a number or ordinal
  ("2", "option two", "the second one", "the last one"), then partial words ("tech" for
  "Technical support", "emails" for "Email"). Ties are not guessed: the caller asks again.
- multi-select: every label named, plus each part of "A and C", "1, 3", "email or phone";
  "all of them", "both" and "none" too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

QuestionType = Literal["freeform", "yes-no", "confirm", "single-select", "multi-select"]
AnswerValue = str | list[str] | None

_YES = (
    "yes", "yeah", "yea", "yep", "yup", "ya", "yah", "aye", "sure", "sure thing", "of course",
    "correct", "thats correct", "right", "thats right", "all right", "alright", "affirmative",
    "absolutely", "definitely", "certainly", "indeed", "ok", "okay", "go ahead", "do it",
    "please do", "yes please", "confirm", "confirmed", "i confirm", "i do", "sounds good",
    "fine", "uh huh", "mhm", "true", "agreed", "i agree", "exactly", "go for it", "why not",
)  # fmt: skip
_NO = (
    "no", "nope", "nah", "naw", "not really", "no thanks", "no thank you", "negative",
    "not at all", "incorrect", "wrong", "thats wrong", "not right", "not correct", "never",
    "no way", "dont", "do not", "please dont", "dont do it", "i dont want", "i dont think so",
    "cancel", "false", "not now", "decline", "i decline", "disagree", "absolutely not",
    "definitely not", "of course not", "certainly not",
)  # fmt: skip
_UNSURE = (
    "not sure", "im not sure", "dont know", "i dont know", "no idea", "maybe", "perhaps",
    "unsure", "i dont mind", "dont mind",
)  # fmt: skip
_POLARITY: dict[str, bool | None] = {
    **dict.fromkeys(_YES, True),
    **dict.fromkeys(_NO, False),
    **dict.fromkeys(_UNSURE, None),
}
_LONGEST = max(len(phrase.split()) for phrase in _POLARITY)
_SKIP = frozenset(
    {
        "skip", "skip it", "skip this", "skip that", "skip this one", "pass", "next",
        "next question", "no preference", "dont care", "i dont care", "doesnt matter",
        "it doesnt matter", "whatever", "you choose", "you decide", "up to you",
        "its up to you", "any", "either", "either one", "default", "use the default",
    }
)  # fmt: skip
_ALL = frozenset({"all", "all of them", "all of those", "all of the above", "everything", "both"})
_NONE = frozenset({"none", "none of them", "none of those", "neither", "nothing"})

_CARDINALS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_ORDINALS = {
    "first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
    "fifth": 5, "5th": 5, "sixth": 6, "6th": 6, "seventh": 7, "7th": 7, "eighth": 8, "8th": 8,
    "ninth": 9, "9th": 9, "tenth": 10, "10th": 10,
}  # fmt: skip
# Speech recognizers hear "option two" as "option to" now and then; only after these words.
_NUMBER_WORDS = frozenset({"number", "option", "choice", "num"})
_HOMOPHONES = {"won": 1, "to": 2, "too": 2, "for": 4, "ate": 8}
_LAST = frozenset({"last", "final"})
_FILLER = frozenset(
    {
        "the", "a", "an", "one", "ones", "i", "id", "ill", "im", "want", "would", "like", "take",
        "go", "with", "pick", "choose", "please", "option", "options", "choice", "number", "its",
        "it", "that", "this", "is", "my", "answer", "say", "lets", "let", "me", "us", "for", "of",
        "to", "prefer", "rather", "think", "thanks", "thank", "you", "well", "um", "uh", "hmm",
        "oh", "okay", "ok", "so", "yes", "yeah", "just",
    }
)  # fmt: skip
_SEPARATOR = re.compile(r"\b(?:and|plus|or|also|as well as|then)\b|[,;/&+]")


@dataclass(frozen=True)
class ParsedAnswer:
    """An understood reply: a value (`"yes"`/`"no"`, a label, labels, or text), or a skip."""

    value: AnswerValue = None
    skipped: bool = False


def normalize(text: str) -> str:
    """Lower case, apostrophes dropped, other punctuation turned into single spaces."""
    text = text.lower().replace("’", "'").replace("'", "")
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def is_skip(text: str) -> bool:
    """Whether the reply declines to answer ("skip", "no preference", "up to you")."""
    return normalize(text) in _SKIP


def parse_yes_no(text: str) -> bool | None:
    """True for yes, False for no, None when the reply says neither (or is unsure)."""
    tokens = normalize(text).split()
    decided: bool | None = None
    index = 0
    while index < len(tokens):
        for size in range(min(_LONGEST, len(tokens) - index), 0, -1):
            phrase = " ".join(tokens[index : index + size])
            if phrase in _POLARITY:
                polarity = _POLARITY[phrase]
                if polarity is not None:
                    decided = polarity  # the last decisive phrase wins
                index += size
                break
        else:
            index += 1
    return decided


def match_options(labels: Sequence[str], text: str, *, multiple: bool = False) -> list[str] | None:
    """The labels `text` picks, in option order; None when it picks nothing clearly.

    Single-select returns one label. Multi-select may return [] ("none of them").
    """
    said = normalize(text)
    forms = [normalize(label) for label in labels]
    if not said:
        return None
    if said in forms:
        return [labels[forms.index(said)]]
    if multiple and said in _ALL:
        return list(labels)
    if multiple and said in _NONE:
        return []
    chosen = _named_labels(forms, said.split())
    if multiple:
        # Split the raw reply: normalizing first would lose the commas of "1, 3".
        for part in _SEPARATOR.split(text.lower()):
            picked = _pick_one(forms, normalize(part))
            if picked is not None:
                chosen.add(picked)
        return [labels[i] for i in sorted(chosen)] or None
    if len(chosen) == 1:
        return [labels[chosen.pop()]]
    if chosen:
        return None  # two labels named: ask again rather than guess
    picked = _pick_one(forms, said)
    return [labels[picked]] if picked is not None else None


def parse_answer(kind: QuestionType, labels: Sequence[str], text: str) -> ParsedAnswer | None:
    """Understand `text` as an answer to a question of `kind` with option `labels`.

    Returns None when nothing matches (ask again), `skipped=True` when the person declines.
    """
    said = normalize(text)
    exact = [label for label in labels if normalize(label) == said]
    if exact and kind in ("single-select", "multi-select"):
        # An option may itself read like a skip ("Any", "None"): the option wins.
        return ParsedAnswer(exact if kind == "multi-select" else exact[0])
    if not text.strip() or is_skip(text):
        return ParsedAnswer(skipped=True)
    if kind == "freeform":
        return ParsedAnswer(text.strip())
    if kind in ("yes-no", "confirm"):
        answer = parse_yes_no(text)
        return None if answer is None else ParsedAnswer("yes" if answer else "no")
    picked = match_options(labels, text, multiple=kind == "multi-select")
    if picked is None:
        return None
    return ParsedAnswer(picked if kind == "multi-select" else picked[0])


def same_answer(value: AnswerValue, expected: str) -> bool:
    """Whether an answer equals `expected` loosely (case, punctuation, true/false as yes/no);
    a list answer matches when it holds `expected`."""
    if value is None:
        return False
    wanted = _canonical(expected)
    values = value if isinstance(value, list) else [value]
    return any(_canonical(v) == wanted for v in values)


# -- helpers -------------------------------------------------------------------------------------


def _canonical(text: str) -> str:
    said = normalize(text)
    return {"true": "yes", "y": "yes", "false": "no", "n": "no"}.get(said, said)


def _named_labels(forms: Sequence[str], tokens: list[str]) -> set[int]:
    """Options whose whole label appears in the reply; longer labels claim words first, so
    "phone and email" is one label, not also "phone"."""
    taken = [False] * len(tokens)
    found: set[int] = set()
    for index in sorted(range(len(forms)), key=lambda i: -len(forms[i].split())):
        words = forms[index].split()
        size = len(words)
        for start in range(len(tokens) - size + 1):
            span = range(start, start + size)
            if tokens[start : start + size] == words and not any(taken[i] for i in span):
                for i in span:
                    taken[i] = True
                found.add(index)
                break
    return found


def _pick_one(forms: Sequence[str], said: str) -> int | None:
    """One option by exact label, number or ordinal, or partial words."""
    if not said:
        return None
    if said in forms:
        return forms.index(said)
    number = _number(said.split(), len(forms))
    if number is not None:
        return number
    return _partial(forms, said.split())


def _number(tokens: list[str], count: int) -> int | None:
    """A 0-based option index from "2", "two", "option to", "the second one", "the last one"."""
    for index, token in enumerate(tokens):
        after_number_word = index > 0 and tokens[index - 1] in _NUMBER_WORDS
        value = _ORDINALS.get(token)
        if value is None and token in _LAST:
            value = count
        if value is None and after_number_word:
            value = _CARDINALS.get(token) or _HOMOPHONES.get(token)
        if value is None and (token.isdigit() or token in _CARDINALS):
            # A bare number counts only when the rest is filler ("two", "one please").
            rest = [t for i, t in enumerate(tokens) if i != index and t not in _FILLER]
            if not rest:
                value = int(token) if token.isdigit() else _CARDINALS[token]
        if value is not None:
            return value - 1 if 1 <= value <= count else None
    return None


def _partial(forms: Sequence[str], tokens: list[str]) -> int | None:
    """The option sharing the most words with the reply (prefixes of 3+ letters count)."""
    words = [t for t in tokens if t not in _FILLER]
    scores = []
    for form in forms:
        label_words = form.split()
        score = sum(any(_alike(word, lw) for word in words) for lw in label_words)
        scores.append(score)
    best = max(scores, default=0)
    if best == 0 or scores.count(best) > 1:
        return None
    return scores.index(best)


def _alike(word: str, label_word: str) -> bool:
    if word == label_word:
        return True
    shorter = min(len(word), len(label_word))
    return shorter >= 3 and (label_word.startswith(word) or word.startswith(label_word))
