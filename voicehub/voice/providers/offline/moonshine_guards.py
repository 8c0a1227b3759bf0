"""Guards against Moonshine's failure modes, as plain rules on tokens and samples.

- Audio cut mid-word can send the decoder round a loop ("number number number ..."): a
  decoding gets at most `token_budget` tokens for its audio, and stops where its last
  tokens repeat (`repeating_tail`), the repeats dropped.
- The encoder reads the whole utterance at once, and a long one costs more and decodes
  worse: audio longer than `MAX_PIECE` seconds is cut at its quietest moments
  (`pieces`), each piece decoded alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MAX_PIECE", "TOKENS_PER_SECOND", "pieces", "repeating_tail", "token_budget"]

TOKENS_PER_SECOND = 6.5
"""The most tokens a second of audio is decoded into (Moonshine's own reference decoder's
cap; speech runs at 3-4 tokens a second)."""
_SPARE_TOKENS = 4  # a short word said in under a second still fits

MAX_PIECE = 12.0
"""Seconds of audio decoded at once, at most; longer audio is cut at pauses."""
_MIN_PIECE = 4.0  # no cut leaves a piece shorter than this (seconds)
_FRAME = 0.05  # the loudness of audio is judged over this much (seconds)

_REPEATS = 3  # a phrase said this many times over in a row is a loop
_LONGEST_PHRASE = 4  # tokens


def token_budget(seconds: float) -> int:
    """The most tokens `seconds` of audio may be decoded into."""
    return math.ceil(max(0.0, seconds) * TOKENS_PER_SECOND) + _SPARE_TOKENS


def repeating_tail(tokens: Sequence[int]) -> int | None:
    """Where a loop at the end of `tokens` starts repeating: the length to cut `tokens` to
    (its first saying kept), or None when the end is no loop. A loop is one phrase of 1 to
    `_LONGEST_PHRASE` tokens said `_REPEATS` times in a row."""
    for size in range(1, _LONGEST_PHRASE + 1):
        span = size * _REPEATS
        if len(tokens) < span:
            break
        tail = list(tokens[-span:])
        phrase = tail[:size]
        if all(tail[i : i + size] == phrase for i in range(0, span, size)):
            return len(tokens) - span + size
    return None


def pieces(samples: np.ndarray, rate: int) -> list[tuple[int, int]]:
    """`samples` as (start, end) pieces of at most `MAX_PIECE` seconds, each cut at the
    quietest `_FRAME` between `_MIN_PIECE` seconds into the piece and its end."""
    total = len(samples)
    longest = int(MAX_PIECE * rate)
    if total <= longest:
        return [(0, total)]
    frame = max(1, int(_FRAME * rate))
    result: list[tuple[int, int]] = []
    start = 0
    while total - start > longest:
        first = start + int(_MIN_PIECE * rate)
        last = start + longest - frame
        quietest, cut = math.inf, last
        for at in range(first, last + 1, frame):
            loudness = float(np.mean(np.abs(samples[at : at + frame])))
            if loudness < quietest:
                quietest, cut = loudness, at + frame // 2
        result.append((start, cut))
        start = cut
    result.append((start, total))
    return result
