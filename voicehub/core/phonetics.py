"""How words sound, roughly: a small phonetic key and an edit-distance similarity.

Shared by the recognizer's desk-vocabulary correction (`vocabulary_correction`: "lead
lights" sounds like "led lights") and the scripted agent's tolerant matching (a trigger
word misheard as one that sounds like it: "write up on" for "read up on"), which sit in
layers that cannot import each other.
"""

from __future__ import annotations

import re

__all__ = ["phonetic_key", "similarity", "sounds_alike"]

_VOWELS = set("aeiouy")
_SPELLINGS = (
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
)
_VOICED = {"c": "k", "q": "k", "g": "k", "d": "t", "b": "p", "v": "f", "z": "s"}
"""Letters keyed as another: hard c and q as k, and each voiced consonant as its voiceless
pair (a phone line and a small recognizer blur voicing: "write" for "read")."""


def phonetic_key(text: str) -> str:
    """A simplified metaphone of `text`'s letters: each consonant sound as one letter (X
    for sh/ch/-tion, 0 for th, K for hard c/g/q, S for soft c, F for ph), silent gh, kn, wr
    and doubled letters dropped, vowels dropped except a leading one."""
    word = re.sub(r"[^a-z]", "", text.lower())
    for written, sound in _SPELLINGS:
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
        sound = _VOICED.get(letter, letter)
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


def sounds_alike(heard: str, meant: str) -> bool:
    """Whether the word `heard` could be `meant` misheard by sound: the same phonetic key
    ("write" and "read": RT; not "is" and "how's", IS against HS). A word without letters
    sounds like nothing."""
    key = phonetic_key(heard)
    return bool(key) and key == phonetic_key(meant)
