"""Whether a caller's words so far end mid-request: the text half of the end-of-turn test.

The end-of-turn model hears intonation; synthetic and flat voices, and people thinking
aloud, end a half request on a falling tone ("could you research ..."). Words settle many
of those cases: an utterance ending on an article, a preposition, a conjunction, a filler
("um"), or "could you" is not finished, and a desk knows its own half requests (its
scripted agent's `awaits_more`: "could you research" waits for a topic). `ends_open` says
so; the turn policy (`voicehub.voice.turns.policy`) waits on it up to its ceiling.

The other way round, words can say a request is whole: the desk answers them as they
stand ("tell me the opening hours of the library": a rule of its scripted agent takes
them). `makes_request` says so, unless the recognizer wrote the caller trailing off ("...",
a dash); a comma is no such sign (Moonshine ends finished requests with one). The policy
then holds the turn for the model only briefly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

__all__ = ["OPEN_ENDINGS", "ends_inside", "ends_open", "makes_request", "spoken_words"]

# Words after which an English request is not over.
OPEN_ENDINGS = frozenset(
    {
        # articles and determiners
        "a", "an", "the", "my", "your", "our", "their",
        # prepositions ("on", "in", "by" end phrasal verbs: "go on", "log in", "stand by")
        "about", "into", "onto", "of", "for", "to", "with", "at", "from",
        # a verb still waiting for what it says ("my internet is", "the line has")
        "is", "are", "was", "has",
        # conjunctions
        "and", "or", "but", "because", "if", "than",
        # fillers: the caller is thinking
        "um", "umm", "uh", "uhh", "er", "erm", "uhm", "hmm", "mm",
    }
)  # fmt: skip
# Two-word endings: a question that has not said what it asks yet.
_OPEN_PAIRS = frozenset(
    {
        ("could", "you"), ("can", "you"), ("would", "you"), ("will", "you"),
        ("i", "want"), ("i'd", "like"), ("i", "need"), ("do", "you"), ("tell", "me"),
    }
)  # fmt: skip
_WORD = re.compile(r"[a-z']+")
# What a transcript ends on when the caller trailed off: an ellipsis or a dash.
_TRAILING_OFF = re.compile(r"(\.\.\.|\u2026|[-\u2013\u2014])\W*$")


def spoken_words(text: str) -> list[str]:
    """The words of a transcript, lower case, punctuation dropped ("Heat pumps, for me."
    -> ["heat", "pumps", "for", "me"]); apostrophes inside words stay."""
    return [word.strip("'") for word in _WORD.findall(text.lower()) if word.strip("'")]


def ends_open(
    text: str,
    awaits_more: Callable[[str], bool] | None = None,
    phrases: Iterable[str] = (),
) -> bool:
    """Whether `text`, a caller's words so far, stops mid-request: its last word is one no
    request ends on (`OPEN_ENDINGS`), it ends on "could you" and the like, it stops inside
    one of `phrases` (a desk's topics, `ends_inside`), or the desk says it waits for more
    (`awaits_more`, e.g. `ScriptedLLM.awaits_more`). Empty text is not open: there is
    nothing to wait for."""
    words = spoken_words(text)
    if not words:
        return False
    if words[-1] in OPEN_ENDINGS:
        return True
    if len(words) >= 2 and (words[-2], words[-1]) in _OPEN_PAIRS:
        return True
    if ends_inside(words, phrases):
        return True
    return awaits_more is not None and awaits_more(" ".join(words))


def ends_inside(words: Sequence[str], phrases: Iterable[str]) -> bool:
    """Whether `words` (`spoken_words`) end partway through one of `phrases`: their last
    words are the start of a phrase of more words ("... heat" of "heat pumps"), and do
    not finish it."""
    for phrase in phrases:
        wanted = spoken_words(phrase)
        for size in range(1, len(wanted)):
            if len(words) >= size and list(words[-size:]) == wanted[:size]:
                return True
    return False


def makes_request(text: str, takes: Callable[[str], bool]) -> bool:
    """Whether `text`, a caller's words so far, is a whole request: `takes(text)`, the desk
    answers it as it stands (a rule of its scripted agent matches it), and the transcript
    does not end trailing off ("library..." or "library -"; a comma or no mark at all is
    not trailing off). Whether the words end mid-request is `ends_open`'s to say: the turn
    policy asks both."""
    if not spoken_words(text) or _TRAILING_OFF.search(text) is not None:
        return False
    return takes(text)
