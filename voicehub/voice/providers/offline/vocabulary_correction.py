"""Desk-vocabulary correction of transcripts, like a commercial recognizer's "keywords".

After recognition, a span of the transcript that sounds like one of the desk's topics but is
not it is replaced by the topic: Whisper tiny on a phone line hears "installation" for
"insulation", "lead lights" for "LED lights", "high road power" for "hydro power". A span
sounds like a topic when both of these are close, on the span's words run together against
the topic's (or its singular: "let's light" is measured against "led light"):

- a phonetic key (`phonetic_key`, a small metaphone: consonant sounds, vowels dropped but
  a leading one), compared by edit distance with transpositions, over the longer key;
- the letters themselves, compared the same way;

their mean reaching `THRESHOLD`, and the span starting with the topic's first sound (a
caller's first consonant is the part least often misheard, and without it "the lights"
would be a step from "led lights"). "home information" stays: "information" is three sounds
from "insulation" (INFRMXN against INSLXN), as far as "I need information" is from it, so
no rule that keeps ordinary words apart can take it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from voicehub.voice.providers.offline.whisper_relisten import singular

__all__ = ["THRESHOLD", "VocabularyCorrection", "phonetic_key", "similarity"]

THRESHOLD = 0.7
"""The mean of phonetic-key and letter similarity at which a span is taken for a topic.
Chosen on the phone bench's tuning, held-out and fresh parts (never `fresh2`)."""

_WORD = re.compile(r"[A-Za-z']+")
_VOWELS = set("aeiouy")
_GRAMMAR = frozenset(
    {"a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "and"}
    | {"or", "but", "is", "are", "was", "it", "its", "this", "that", "i", "me", "my", "you"}
    | {"your", "we", "our", "he", "she", "they", "them", "his", "her", "what", "how"}
)
"""Words a span may not hold: short words of the sentence's grammar, which the recognizer
rarely mishears and no topic is made of ("I lit a light" is no "led light")."""


def phonetic_key(text: str) -> str:
    """A simplified metaphone of `text`'s letters: each consonant sound as one letter (X
    for sh/ch/-tion, 0 for th, K for hard c/g/q, S for soft c, F for ph), silent gh, kn, wr
    and doubled letters dropped, vowels dropped except a leading one."""
    word = re.sub(r"[^a-z]", "", text.lower())
    for written, sound in (
        ("tion", "xn"),
        ("sion", "xn"),
        ("sh", "x"),
        ("ch", "x"),
        ("th", "0"),
        ("ph", "f"),
        ("ck", "k"),
        ("gh", ""),
        ("kn", "n"),
        ("wr", "r"),
        ("ce", "se"),
        ("ci", "si"),
        ("cy", "sy"),
    ):
        word = word.replace(written, sound)
    key: list[str] = []
    for index, letter in enumerate(word):
        if letter in _VOWELS:
            if index == 0:
                key.append(letter.upper())
            continue
        if letter == "h" and (index + 1 == len(word) or word[index + 1] not in _VOWELS):
            continue  # "h" sounds only before a vowel
        if letter == "w" and (index + 1 == len(word) or word[index + 1] not in _VOWELS):
            continue
        sound = {"c": "k", "q": "k", "g": "k", "d": "t", "b": "p", "v": "f", "z": "s"}.get(
            letter, letter
        )
        if not key or key[-1] != sound.upper():
            key.append(sound.upper())
    return "".join(key)


def similarity(a: str, b: str) -> float:
    """1 - the edit distance (with adjacent transpositions) between `a` and `b` over the
    longer's length: 1.0 the same, 0.0 nothing in common."""
    if not a and not b:
        return 1.0
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return 1.0 - previous[len(b)] / max(len(a), len(b))


@dataclass(frozen=True, slots=True)
class _Form:
    topic: str  # what replaces the span
    letters: str
    key: str
    words: int
    said: frozenset[str]  # the letters of the topic and of its singular: said right


@dataclass(frozen=True, slots=True)
class VocabularyCorrection:
    """Replaces spans of a transcript that sound like one of `topics` (the desk's knowledge
    topics) with the topic, when their `score` reaches `threshold`. A span has as many
    words as the topic, or one more (two words heard for one: "high road" for "hydro")."""

    topics: Sequence[str]
    threshold: float = THRESHOLD

    def correct(self, text: str) -> str:
        """`text` with each span taken for a topic replaced by it; the rest, punctuation
        included, as heard."""
        words = list(_WORD.finditer(text))
        forms = self._forms()  # a few per topic: cheap next to a decoding
        found: list[tuple[float, int, int, str]] = []  # (score, first, end, topic)
        for first in range(len(words)):
            for form in forms:
                for end in range(first + form.words, min(first + form.words + 1, len(words)) + 1):
                    span = [w.group() for w in words[first:end]]
                    score = self.score(span, form)
                    if score >= self.threshold:
                        found.append((score, first, end, form.topic))
        chosen: list[tuple[int, int, str]] = []
        for _score, first, end, topic in sorted(found, key=lambda f: -f[0]):
            if all(end <= f or first >= e for f, e, _ in chosen):
                chosen.append((first, end, topic))
        for first, end, topic in sorted(chosen, reverse=True):
            text = text[: words[first].start()] + topic + text[words[end - 1].end() :]
        return text

    def score(self, span: Sequence[str], form: _Form) -> float:
        """How much the words `span` sound like `form`'s topic: 0.0 when they say it already
        (singular or plural, alone or with a word before or after it), hold a word of
        grammar (`_GRAMMAR`) or start with another sound, else the mean of the
        phonetic-key and letter similarities."""
        if any(word.lower() in _GRAMMAR for word in span):
            return 0.0
        letters = _letters(" ".join(span))
        if {letters, _letters(" ".join(span[1:])), _letters(" ".join(span[:-1]))} & form.said:
            return 0.0
        key = phonetic_key(letters)
        if not key or key[0] != form.key[0]:
            return 0.0
        return (similarity(key, form.key) + similarity(letters, form.letters)) / 2

    def _forms(self) -> list[_Form]:
        forms: list[_Form] = []
        for topic in self.topics:
            words = topic.lower().split()
            if not words:
                continue
            spoken = {" ".join(words), " ".join([*words[:-1], singular(words[-1])])}
            said = frozenset(_letters(s) for s in spoken)
            for each in spoken:
                letters = _letters(each)
                forms.append(_Form(topic, letters, phonetic_key(letters), len(words), said))
        return forms


def _letters(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())
