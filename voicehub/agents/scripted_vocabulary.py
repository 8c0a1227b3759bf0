"""What callers are expected to say to a scripted agent's rules, for biasing a speech
recognizer: the rules' trigger phrases (`rule_vocabulary`, a prompt's list of phrases) and
sentences a caller might say to them (`example_requests`, a prompt of whole requests)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voicehub.agents.scripted import ScriptedRule

__all__ = ["example_requests", "rule_vocabulary"]

_REGEX_NOISE = re.compile(r"\(\?P<\w+>|\\[A-Za-z]|\(\?[:=!<]*")


def example_requests(rules: Sequence[ScriptedRule], topics: Sequence[str]) -> list[str]:
    """Sentences a caller might say to the `rules` that call a tool, built from their
    trigger phrases and `topics`: a rule whose regex takes a named group after its phrases
    ("research (?P<topic>...)") gets each topic after one of them in turn ("Research solar
    panels.", "Look into wind turbines."), any other rule each of its phrases ("Any
    news."). A speech recognizer primed with these hears requests as requests; a list of
    bare phrases primes it to answer a list of phrases ("Look into, find out about,")."""
    sentences: list[str] = []
    for rule in rules:
        if rule.on != "user" or rule.tool is None:
            continue
        leads = _slot_leads(rule.regex) if rule.regex is not None else []
        if leads and topics:
            sentences += [f"{leads[i % len(leads)]} {topic}" for i, topic in enumerate(topics)]
        else:
            sentences += rule_vocabulary([rule])
    return [sentence[:1].upper() + sentence[1:] + "." for sentence in sentences]


def _slot_leads(regex: str) -> list[str]:
    """The literal phrases of `regex` before its first named group (none without one), but
    a lone word of three letters or fewer ("so", "the": grammar, not a trigger)."""
    before, group, _ = regex.partition("(?P<")
    if not group:
        return []
    phrases = _literal_phrases(before)
    return [phrase for phrase in phrases if " " in phrase or len(phrase) > 3]


def _literal_phrases(regex: str) -> list[str]:
    """The runs of literal words in `regex` (its alternatives), longer than two letters."""
    phrases: list[str] = []
    literal = _REGEX_NOISE.sub(" ", regex)
    for part in re.split(r"[|()\[\]?*+.,$^{}!]", literal):
        words = re.findall(r"[A-Za-z']{2,}", part)
        if len(" ".join(words)) > 2:  # not "so", "an": filler, not vocabulary
            phrases.append(" ".join(words))
    return phrases


def rule_vocabulary(rules: Sequence[ScriptedRule], *, tools_only: bool = False) -> list[str]:
    """The words callers are expected to say to `rules`: each `match` phrase, and the literal
    words of each `regex` (its alternatives), in rule order. A speech recognizer biased to
    these mishears trigger phrases less often. `tools_only`: only the rules that call a tool
    (the requests worth biasing for; greetings in Whisper's prompt made it hear "Good
    evening" at the start of requests it could not make out)."""
    phrases: list[str] = []
    for rule in rules:
        if rule.on != "user" or (tools_only and rule.tool is None):
            continue
        phrases += [phrase for phrase in rule.match if phrase != "*"]
        if rule.regex is not None:
            phrases += _literal_phrases(rule.regex)
    return phrases
