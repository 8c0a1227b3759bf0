"""Desk-vocabulary correction of transcripts: spans that sound like one of the research
desk's topics are replaced by it; ordinary words, even sharing letters or a sound with a
topic, are left as heard."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection

CHANNELS = Path(__file__).resolve().parents[4] / "channels"


@pytest.fixture(scope="module")
def research() -> VocabularyCorrection:
    with (CHANNELS / "knowledge" / "research.toml").open("rb") as file:
        topics = tuple(entry["topic"] for entry in tomllib.load(file)["entries"])
    return VocabularyCorrection(topics=topics)


@pytest.mark.parametrize(
    ("heard", "corrected"),
    [
        ("What are lead lights?", "What are led lights?"),
        ("what are land lights", "what are led lights"),
        ("could you research let's light", "could you research led lights"),
        ("what is installation", "what is insulation"),
        ("Can you dig into installation?", "Can you dig into insulation?"),
        ("look into high road power", "look into hydro power"),
    ],
)
def test_a_misheard_topic_is_corrected(
    research: VocabularyCorrection, heard: str, corrected: str
) -> None:
    assert research.correct(heard) == corrected


@pytest.mark.parametrize(
    "heard",
    [
        "I read about it in the paper",
        "the weather is nice today",
        "what about the weekend",
        "the lights in the hall",
        "my heating bill went up",
        "I need some information",
        # "home information" is as far from "insulation" as any "information" is.
        "can you dig into home information",
        # Already the topic, singular or plural: left exactly as heard.
        "what are LED lights",
        "research a solar panel please",
        "what is a heat pump",
        "",
    ],
)
def test_ordinary_words_and_topics_said_right_are_left_as_heard(
    research: VocabularyCorrection, heard: str
) -> None:
    assert research.correct(heard) == heard


@pytest.mark.parametrize(
    "heard",
    ["I lit a light", "he led us", "wind it up", "high power", "hydrant", "smart", "the bat"],
)
def test_words_merely_sharing_letters_with_a_topic_are_not_corrected(
    research: VocabularyCorrection, heard: str
) -> None:
    assert research.correct(heard) == heard


def test_a_higher_threshold_corrects_less() -> None:
    strict = VocabularyCorrection(topics=("hydro power",), threshold=0.9)
    assert strict.correct("look into high road power") == "look into high road power"
    assert strict.correct("look into hydra power") == "look into hydro power"
