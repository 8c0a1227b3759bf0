"""How a scripted rule matches a turn: exactly, or with one slip of the recognizer.

`compile_rule` turns a rule's phrases and regex into patterns; `match_rule` finds the first
that matches and returns its named groups; `near_match` is the tolerant second pass for a
caller turn nothing matched exactly (a misheard, dropped, split or joined word of a trigger
phrase).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from voicehub.agents.scripted_vocabulary import rule_vocabulary
from voicehub.core.phonetics import sounds_alike

if TYPE_CHECKING:
    from voicehub.agents.scripted import ScriptedRule

__all__ = ["compile_rule", "match_rule", "near_match"]


def compile_rule(rule: ScriptedRule) -> list[re.Pattern[str]]:
    patterns = [re.compile(rule.regex, re.IGNORECASE | re.DOTALL)] if rule.regex else []
    for phrase in rule.match:
        if phrase == "*":
            patterns.append(re.compile(r"(?s).*"))
        else:
            patterns.append(re.compile(r"\b" + re.escape(phrase) + r"\b", re.IGNORECASE))
    return patterns


def match_rule(
    patterns: list[re.Pattern[str]], rule: ScriptedRule, text: str
) -> dict[str, str] | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found is not None:
            return {k: (v or "").strip() for k, v in found.groupdict().items()}
    return None


def near_match(
    rule: ScriptedRule, pattern: list[re.Pattern[str]], text: str
) -> dict[str, str] | None:
    """Groups of `rule` when `text` says one of its trigger phrases with one slip of the
    recognizer (`_slips`). A `match` rule then matches; a `regex` rule matches the text with
    the phrase put right (its alternatives are its phrases), so its groups still take the
    words after it."""
    words = re.findall(r"[\w']+", text)
    lowered = [word.lower() for word in words]
    phrases = rule_vocabulary([rule]) if rule.regex is not None else list(rule.match)
    for phrase in phrases:
        wanted = re.findall(r"[\w']+", phrase.lower())
        if len(wanted) < 2:
            continue  # one word is too little to guess from
        for start, end in _slips(lowered, wanted):
            if rule.regex is None:
                return {}
            repaired = " ".join(words[:start] + wanted + words[end:])
            groups = match_rule(pattern, rule, repaired)
            if groups is not None:
                return groups
    return None


def _slips(heard: list[str], wanted: list[str]) -> Iterator[tuple[int, int]]:
    """Spans `heard[start:end]` that say `wanted` with one slip a recognizer makes:
    - one word wrong: an inner or last word of a phrase of three or more words; its first
      word only when spelled or sounding alike (`_alike`, `sounds_alike`: "write up on" for
      "read up on"; a phrase is known by its start: "is it going to rain" is not "how's it
      going" misheard, IS against HS); a word of a two-word phrase only when spelled alike
      ("did into" for "dig into"; "any nose" is not taken for "any news");
    - an inner word of a phrase of three or more words dropped ("read on" for "read up on");
    - words split or joined ("in to" for "into", "nevermind" for "never mind")."""
    size = len(wanted)
    joined = "".join(wanted)
    inner_dropped = [wanted[:i] + wanted[i + 1 :] for i in range(1, size - 1)]
    for start in range(len(heard)):
        # Split or joined first: the words are all there ("in to" is not "in" misheard).
        for length in (size - 1, size + 1):
            span = heard[start : start + length]
            if length > 0 and len(span) == length and "".join(span) == joined:
                yield start, start + length
        window = heard[start : start + size]
        if len(window) == size:
            wrong = [(a, b) for a, b in zip(window, wanted, strict=True) if a != b]
            if len(wrong) == 1 and _slip_allowed(window[0], *wrong[0], wanted):
                yield start, start + size
        if heard[start : start + size - 1] in inner_dropped:
            yield start, start + size - 1


def _slip_allowed(first: str, heard: str, meant: str, wanted: list[str]) -> bool:
    """Whether `heard`, said for `meant` in a span starting with `first`, is a slip of the
    recognizer in phrase `wanted` (`_slips`)."""
    if len(wanted) == 2:
        return _alike(heard, meant)
    return first == wanted[0] or _alike(heard, meant) or sounds_alike(heard, meant)


def _alike(heard: str, meant: str) -> bool:
    """Words a recognizer confuses: same first letter, mostly the same letters ("did" and
    "dig"; not "nose" and "news", nor "get" and "forget"). Not "if" for "is", though a phone
    line blurs s and f: "what if it rains" would then be a question for the knowledge base
    (the phone bench's unrelated utterances). A heard word of one or two letters is too
    little to go on: "what a lovely day", heard "what I lovely day", is not "what is", nor
    "I'll dig in the paper" "dig into" (both false triggers on the phone bench)."""
    return (
        len(heard) >= 3
        and heard[:1] == meant[:1]
        and difflib.SequenceMatcher(None, heard, meant).ratio() >= 0.6
    )
