"""A small knowledge base and the builtin `search_knowledge` tool.

A knowledge file is TOML with one `[[entries]]` table per fact:

    [[entries]]
    topic = "heat pumps"
    keywords = ["heat pump", "heating", "air source"]
    text = "A heat pump moves heat from the outside air into a home ..."

Search is deterministic token overlap. Query and entry words are lowercased, common words
("the", "about", ...) dropped and plurals folded ("batteries" -> "battery"). Each query word
scores 3 when it is in the entry's topic, else 2 in its keywords, else 1 in its text. Only
entries with at least one topic or keyword hit match (text words alone are too weak a signal:
most texts share some words); ties go to the earlier entry in the file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voicehub.agents.tools import Tool
from voicehub.core.toml_files import invalid_file, read_toml
from voicehub.errors import ToolError

_WORD = re.compile(r"[a-z0-9]+")
# Words that say nothing about the topic ("tell me more about the batteries").
_STOP_WORDS = frozenset(
    _WORD.findall(
        """a about an and any are as at be can could do does find for from give how i in into is
        it its look me more my of on or out please some tell than that the their them there
        these this to up us want what whats when where which who why will with would you your"""
    )
)
TOPIC_WEIGHT, KEYWORD_WEIGHT, TEXT_WEIGHT = 3, 2, 1


def tokens(text: str) -> list[str]:
    """The search words of `text`: lowercase, no common words, plurals folded."""
    words = _WORD.findall(text.lower().replace("'", ""))
    return [_fold(word) for word in words if word not in _STOP_WORDS]


def _fold(word: str) -> str:
    # Crude but predictable plural folding; both sides of a comparison get the same treatment.
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


class KnowledgeEntry(BaseModel):
    """One fact: what it is about, words that find it, and the text to read out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str = Field(min_length=1)
    keywords: tuple[str, ...] = ()
    text: str = Field(min_length=1)


class KnowledgeFile(BaseModel):
    """The schema of a knowledge TOML file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entries: tuple[KnowledgeEntry, ...] = Field(min_length=1)


@dataclass(frozen=True)
class Match:
    """An entry that matched a query, with its score (higher is better)."""

    entry: KnowledgeEntry
    score: int


@dataclass(frozen=True)
class _Indexed:
    entry: KnowledgeEntry
    topic: frozenset[str]
    keywords: frozenset[str]
    text: frozenset[str]


class KnowledgeBase:
    """Entries searchable by token overlap. Small by design: the whole base is scanned."""

    def __init__(self, entries: Sequence[KnowledgeEntry], *, source: str = "") -> None:
        self.entries = tuple(entries)
        self.source = source
        self._index = [
            _Indexed(
                entry,
                frozenset(tokens(entry.topic)),
                frozenset(t for keyword in entry.keywords for t in tokens(keyword)),
                frozenset(tokens(entry.text)),
            )
            for entry in self.entries
        ]

    @classmethod
    def from_file(cls, path: str | Path) -> KnowledgeBase:
        """Load a knowledge TOML file. Raises ConfigError naming the file and the field."""
        path = Path(path)
        data = read_toml(path, "knowledge file")
        try:
            parsed = KnowledgeFile.model_validate(data)
        except ValidationError as exc:
            raise invalid_file(path, exc) from None
        return cls(parsed.entries, source=str(path))

    @property
    def topics(self) -> list[str]:
        return [entry.topic for entry in self.entries]

    def search(self, query: str, *, limit: int = 2) -> list[Match]:
        """The best entries for `query`, best first: the top match, plus runners-up that score
        at least half as well (up to `limit` in all)."""
        words = list(dict.fromkeys(tokens(query)))
        scored: list[tuple[int, int, KnowledgeEntry]] = []
        for position, item in enumerate(self._index):
            score, anchored = 0, False
            for word in words:
                if word in item.topic:
                    score, anchored = score + TOPIC_WEIGHT, True
                elif word in item.keywords:
                    score, anchored = score + KEYWORD_WEIGHT, True
                elif word in item.text:
                    score += TEXT_WEIGHT
            if anchored:
                scored.append((-score, position, item.entry))
        scored.sort(key=lambda found: (found[0], found[1]))
        if not scored:
            return []
        best = -scored[0][0]
        return [Match(entry, -neg) for neg, _, entry in scored[:limit] if -neg * 2 >= best]

    def answer(self, query: str) -> str:
        """What `search_knowledge` says: the text of the best 1-2 entries, or that nothing
        was found."""
        if not query.strip():
            raise ToolError("query is empty: say what to look up")
        found = self.search(query)
        if not found:
            return f"I found nothing on {query.strip()} in the knowledge base."
        return " ".join(match.entry.text for match in found)


def search_knowledge_tool(knowledge: KnowledgeBase) -> Tool:
    """The builtin `search_knowledge(query)` tool over `knowledge`."""

    def search_knowledge(query: str) -> str:
        """Look a topic up in the knowledge base and return what it says."""
        return knowledge.answer(query)

    topics = ", ".join(knowledge.topics[:12])
    return Tool(
        search_knowledge,
        description=(
            "Look a topic up in the desk's knowledge base and return the best one or two "
            f"entries. Topics include: {topics}."
        ),
    )
