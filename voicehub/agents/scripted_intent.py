"""Half requests and the turn that finishes them, for the scripted agents.

A caller who says "could you research" and stops has asked for research without saying
what: the request is pending. A rule whose regex takes the request's subject in a named
group ("research (?P<topic>.+)") recognises it: the words, with trailing fillers dropped
("um", "please", "for me"), do not match, but would with a subject after them. The agent
asks for the subject (the rule's `ask`), and the caller's next turn, unless it is a
request of its own, is read after the pending words: "could you research" + "heat pumps"
is one request. Recogniser punctuation is gone by then (`without_punctuation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from voicehub.agents.llm import ChatMessage

__all__ = ["PROBE", "continuation", "filler_cuts", "previous_user_turn", "without_punctuation"]

PROBE = "zebra crossings"
"""Stands in for a subject when testing whether words wait for one (any words do)."""

# What a recogniser writes between words: a comma, point or colon before a space or the
# end, other marks anywhere. Inside a number ("7:30", "1,000", "3.5"), a word ("don't",
# "uh-huh") or an id ("call::task-9") punctuation is content, and stays.
_PUNCTUATION = re.compile(r"[;!?\"\u2026]+|[,.:]+(?=\s|$)|(?<!\w)'|'(?!\w)|(?<!\w)-+|-+(?!\w)")
_FILLERS = frozenset(
    {"um", "umm", "uh", "uhh", "er", "erm", "hmm", "please", "now", "then", "the", "a", "an"}
    | {"some", "about"}
)
_FILLER_PAIRS = frozenset({("for", "me"), ("for", "us")})


def without_punctuation(text: str) -> str:
    """`text` with punctuation between words turned into spaces (inside numbers, words and
    ids it stays): "Please find out about, wind
    turbines." -> "Please find out about wind turbines"."""
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def filler_cuts(text: str) -> list[str]:
    """`text` (without punctuation), then without its last filler, and so on while it
    ends on one: "could you research about um" -> ["could you research about um", "could
    you research about", "could you research"]. Fillers: hesitations ("um"), politeness
    ("please", "for me"), and words a request goes on after ("the", "about")."""
    words = text.split()
    cuts = [" ".join(words)] if words else []
    while words:
        if len(words) >= 2 and (words[-2].lower(), words[-1].lower()) in _FILLER_PAIRS:
            words = words[:-2]
        elif words[-1].lower() in _FILLERS:
            words = words[:-1]
        else:
            break
        if words:
            cuts.append(" ".join(words))
    return cuts


def continuation(text: str) -> str:
    """A turn's words read on after earlier ones: a recogniser starts each turn with a
    capital, which mid-sentence is none ("Heat pumps" -> "heat pumps"; "I", "I'm" and
    "LED lights" stay)."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'") or first[1:2].isupper():
        return text
    return text[:1].lower() + text[1:]


def previous_user_turn(messages: Sequence[ChatMessage]) -> str | None:
    """The caller's turn before the latest, when nothing was done about it since: no tool
    was called after it (the agent only spoke, asking or not). None otherwise."""
    for message in reversed(messages[:-1]):
        if message.role == "user":
            return message.content
        if message.role == "tool" or message.tool_calls:
            return None
    return None
