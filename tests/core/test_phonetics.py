"""How words sound: the phonetic key and similarity shared by the recognizer's vocabulary
correction and the scripted agent's tolerant matching."""

from __future__ import annotations

import pytest

from voicehub.core.phonetics import phonetic_key, similarity, sounds_alike


def test_the_phonetic_key_hears_spellings_of_one_sound_alike() -> None:
    assert phonetic_key("lead lights") == phonetic_key("led lights") == "LTLTS"
    assert phonetic_key("insulation") == "INSLXN"
    assert phonetic_key("phone") == phonetic_key("fone")
    assert phonetic_key("knight") == phonetic_key("night") == "NT"
    assert phonetic_key("information") != phonetic_key("insulation")
    assert phonetic_key("") == phonetic_key("!?") == ""


def test_similarity_counts_edits_over_the_longer_string() -> None:
    assert similarity("abc", "abc") == 1.0
    assert similarity("", "") == 1.0
    assert similarity("abc", "xyz") == 0.0
    assert similarity("HTR", "HRT") == pytest.approx(2 / 3)  # one transposition
    assert similarity("ab", "abcd") == 0.5


@pytest.mark.parametrize(
    ("heard", "meant"),
    [("write", "read"), ("right", "read"), ("who", "how"), ("its", "it's"), ("dig", "tick")],
)
def test_words_a_recognizer_hears_for_one_another_sound_alike(heard: str, meant: str) -> None:
    assert sounds_alike(heard, meant)


@pytest.mark.parametrize(
    ("heard", "meant"),
    [("is", "how's"), ("if", "is"), ("would", "could"), ("wait", "read"), ("a", "oh")],
)
def test_words_of_other_sounds_do_not(heard: str, meant: str) -> None:
    assert not sounds_alike(heard, meant)
