"""Desk-vocabulary correction of transcripts, like a commercial recognizer's "keywords".

After recognition, a span of the transcript that sounds like one of the desk's topics but is
not it is replaced by the topic: Whisper tiny on a phone line hears "installation" for
"insulation", "lead lights" for "LED lights", "high road power" for "hydro power". A span
sounds like a topic when both of these are close, on the span's words run together against
the topic's (or its singular: "let's light" is measured against "led light"):

- a phonetic key (`voicehub.core.phonetics.phonetic_key`, a small metaphone: consonant
  sounds, vowels dropped but a leading one), compared by edit distance with
  transpositions, over the longer key;
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

from voicehub.core.phonetics import phonetic_key, similarity
from voicehub.voice.providers.offline.whisper_relisten import singular

__all__ = ["THRESHOLD", "VocabularyCorrection"]

THRESHOLD = 0.7
"""The mean of phonetic-key and letter similarity at which a span is taken for a topic.
Chosen on the phone bench's tuning, held-out and fresh parts (never `fresh2`)."""

_WORD = re.compile(r"[A-Za-z']+")
_GRAMMAR = frozenset(
    {"a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "from", "with", "and"}
    | {"or", "but", "is", "are", "was", "it", "its", "this", "that", "i", "me", "my", "you"}
    | {"your", "we", "our", "he", "she", "they", "them", "his", "her", "what", "how"}
)
"""Words a span may not hold: short words of the sentence's grammar, which the recognizer
rarely mishears and no topic is made of ("I lit a light" is no "led light")."""


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
