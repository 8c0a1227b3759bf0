"""Moonshine's guards as plain rules: the token budget, loops cut to their first saying, and
long audio cut at its quietest moments."""

from __future__ import annotations

import itertools

import numpy as np

from voicehub.voice.providers.offline.moonshine_guards import (
    MAX_PIECE,
    pieces,
    repeating_tail,
    token_budget,
)


def test_the_budget_grows_with_the_audio_and_leaves_room_for_a_short_word() -> None:
    assert token_budget(0.0) == 4
    assert token_budget(0.5) < token_budget(2.0) < token_budget(10.0)
    assert token_budget(10.0) == 69  # 6.5 tokens a second, and 4 spare
    assert token_budget(-1.0) == 4


def test_a_loop_is_cut_to_its_first_saying() -> None:
    assert repeating_tail([5, 9, 9, 9]) == 2  # "number number number" -> "number"
    assert repeating_tail([5, 7, 8, 7, 8, 7, 8]) == 3  # a two-token phrase said thrice
    assert repeating_tail([1, 2, 3, 4] * 3) == 4


def test_words_said_twice_or_phrases_too_long_are_no_loop() -> None:
    assert repeating_tail([]) is None
    assert repeating_tail([5, 9, 9]) is None  # "very very" is English
    assert repeating_tail([5, 9, 6, 9]) is None
    assert repeating_tail([1, 2, 3, 4, 5] * 3) is None  # longer than a loop's phrase


def test_audio_within_a_piece_is_decoded_whole() -> None:
    samples = np.ones(int(MAX_PIECE * 16000), np.float32)
    assert pieces(samples, 16000) == [(0, samples.size)]


def test_long_audio_is_cut_where_it_is_quietest() -> None:
    rate = 16000
    loud = np.full(rate * 20, 0.5, np.float32)
    loud[rate * 9 : rate * 9 + rate // 5] = 0.0  # a pause at 9 s
    cuts = pieces(loud, rate)
    assert cuts[0][0] == 0 and cuts[-1][1] == loud.size
    assert all(end == start for (_, end), (start, _) in itertools.pairwise(cuts))
    assert 9 * rate <= cuts[0][1] <= 9 * rate + rate // 5  # inside the pause
    assert all(end - start <= MAX_PIECE * rate for start, end in cuts)
