"""Caller speech heard over the agent's: a backchannel, a stop, or a turn of its own.

While the agent speaks (a reply or a delivery), a caller who says "uh-huh", "yeah",
"okay", "right", "mm-hm" or "go on" is listening, not taking the turn: the agent goes on.
Words that mean stop ("stop", "wait", "hold on", "no") stop it at once, and so does a real
turn (any other words, or speech too long to be an acknowledgement). `classify_overlap`
says which, from the transcript so far and how long the caller has been voiced; the
engine stops the agent on "stop" and "turn" and keeps it going on the rest. A sound with
no words (a cough, a knock: `voicehub.voice.turns.noise`) is "noise".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from voicehub.voice.turns.words import spoken_words

__all__ = [
    "BACKCHANNELS",
    "MAX_BACKCHANNEL_SECONDS",
    "STOP_PHRASES",
    "Overlap",
    "OverlapKind",
    "classify_overlap",
]

OverlapKind = Literal["backchannel", "stop", "turn", "noise", "undecided"]

# Acknowledgements: the caller is listening. As spoken words (`spoken_words`): "uh-huh"
# is ("uh", "huh"), "mm-hm" is ("mm", "hm").
BACKCHANNELS: frozenset[tuple[str, ...]] = frozenset(
    tuple(phrase.split())
    for phrase in (
        "uh huh", "uh-huh", "uhuh", "mm hm", "mm hmm", "mhm", "mmhm", "mmhmm", "mm", "hmm",
        "m hm", "m h m", "um hm", "yeah", "yes", "yep", "yup", "yah", "ya", "ok", "okay", "o k",
        "kay", "right", "alright", "all right", "sure", "go on", "got it", "i see", "oh",
        "ah", "aha", "cool", "great", "good", "nice", "fine", "wow", "exactly", "of course",
        "true", "indeed", "thanks", "thank you", "sounds good", "makes sense", "that's right",
        "go ahead", "carry on",
    )
)  # fmt: skip
# Words that mean "stop talking", said over the agent: they stop it at once.
STOP_PHRASES: frozenset[tuple[str, ...]] = frozenset(
    tuple(phrase.split())
    for phrase in (
        "stop", "wait", "hold on", "hang on", "no", "nope", "pause", "enough", "quiet",
        "shut up", "excuse me", "cancel", "never mind", "nevermind", "one moment",
        "one second", "just a moment", "just a second",
    )
)  # fmt: skip
MAX_BACKCHANNEL_SECONDS = 1.5
"""Voiced speech longer than this is a turn, whatever it says (an acknowledgement is
short; a recogniser may still be catching up on a long one)."""

_LONGEST = max(len(phrase) for phrase in BACKCHANNELS | STOP_PHRASES)


@dataclass(frozen=True, slots=True)
class Overlap:
    """The verdict on caller speech over the agent's, and the words it rests on."""

    kind: OverlapKind
    words: tuple[str, ...] = ()

    @property
    def interrupts(self) -> bool:
        """Whether the agent must stop ("stop" or "turn")."""
        return self.kind in ("stop", "turn")


def classify_overlap(transcript: str, *, voiced_seconds: float, final: bool) -> Overlap:
    """What the caller's speech over the agent's is (see the module).

    `transcript`: the caller's words so far (interim or `final`); `voiced_seconds`: how
    long the caller has been voiced. An interim transcript of acknowledgements is
    "undecided" ("yeah" may go on "yeah, but what about solar panels"): the agent goes on
    until the final one, or until other words come. Stop words and other words decide at
    once, interim or final.
    """
    words = tuple(spoken_words(transcript))
    if _contains(words, STOP_PHRASES):
        return Overlap("stop", words)
    if voiced_seconds > MAX_BACKCHANNEL_SECONDS:
        return Overlap("turn", words)
    if not words:
        return Overlap("noise" if final else "undecided", words)
    if not _covered(words, BACKCHANNELS):
        return Overlap("turn", words)
    return Overlap("backchannel" if final else "undecided", words)


def _contains(words: tuple[str, ...], phrases: frozenset[tuple[str, ...]]) -> bool:
    return any(
        words[start : start + size] in phrases
        for start in range(len(words))
        for size in range(1, _LONGEST + 1)
    )


def _covered(words: tuple[str, ...], phrases: frozenset[tuple[str, ...]]) -> bool:
    """Whether `words` are `phrases` end to end ("yeah yeah okay", "uh huh right")."""
    reachable = [True] + [False] * len(words)  # reachable[i]: words[:i] is covered
    for end in range(1, len(words) + 1):
        reachable[end] = any(
            reachable[end - size] and words[end - size : end] in phrases
            for size in range(1, min(_LONGEST, end) + 1)
        )
    return reachable[-1]
