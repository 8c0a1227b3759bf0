"""Cut a model's streamed text into sentences, so speech can start at the first one."""

from __future__ import annotations

import re

__all__ = ["SentenceSplitter"]

# A sentence ends at . ! or ? (and closing quotes or brackets) followed by a space; a few
# abbreviations and single letters ("Dr.", "e.g.", "J. Smith") do not end one.
_END = re.compile(r"[.!?][\"')\]]*\s+")
_NOT_AN_END = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|St|vs|etc|e\.g|i\.e)|\b[A-Z])\.$")


class SentenceSplitter:
    """Feed text deltas with `push`; take whole sentences as they complete, the rest with
    `flush`. A sentence shorter than `min_chars` waits for the next one (a TTS says "Sure."
    alone with an odd pause)."""

    def __init__(self, min_chars: int = 12) -> None:
        self.min_chars = min_chars
        self._text = ""

    def push(self, delta: str) -> list[str]:
        """The sentences `delta` completed (possibly none)."""
        self._text += delta
        sentences: list[str] = []
        start = 0
        for match in _END.finditer(self._text):
            candidate = self._text[start : match.end()].strip()
            if _NOT_AN_END.search(self._text[start : match.start() + 1]):
                continue
            if len(candidate) < self.min_chars:
                continue
            sentences.append(candidate)
            start = match.end()
        self._text = self._text[start:]
        return sentences

    def flush(self) -> str:
        """Whatever is left (the last sentence, unterminated); empties the splitter."""
        rest, self._text = self._text.strip(), ""
        return rest
