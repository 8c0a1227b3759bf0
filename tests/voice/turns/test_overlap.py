"""Caller speech over the agent's: acknowledgements and noise go on, stop words and real
turns stop it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.speech import spoken
from voicehub.voice.turns.noise import MAX_NOISE_SECONDS, is_noise_burst, listen_to_burst
from voicehub.voice.turns.overlap import BACKCHANNELS, classify_overlap

RATE = 16000


@pytest.mark.parametrize(
    "heard",
    ["Uh-huh.", "Yeah.", "Okay.", "Right.", "Mm-hmm.", "Go on.", "yeah yeah", "OK, sure", "mhm"],
)
def test_acknowledgements_do_not_interrupt(heard: str) -> None:
    verdict = classify_overlap(heard, voiced_seconds=0.4, final=True)
    assert verdict.kind == "backchannel" and not verdict.interrupts
    # an interim one is not decided yet ("yeah, but ..."): the agent goes on meanwhile
    assert classify_overlap(heard, voiced_seconds=0.4, final=False).kind == "undecided"


@pytest.mark.parametrize(
    "heard", ["Stop.", "Wait!", "hold on", "No.", "yeah, wait", "okay stop", "hang on a second"]
)
def test_stop_words_interrupt_at_once(heard: str) -> None:
    for final in (True, False):
        verdict = classify_overlap(heard, voiced_seconds=0.4, final=final)
        assert verdict.kind == "stop" and verdict.interrupts


@pytest.mark.parametrize("heard", ["what about solar panels", "yeah but how much is it", "uh"])
def test_other_words_are_a_turn_of_their_own(heard: str) -> None:
    verdict = classify_overlap(heard, voiced_seconds=0.5, final=False)
    assert verdict.kind == "turn" and verdict.interrupts


def test_long_speech_is_a_turn_whatever_it_says_and_silence_is_noise() -> None:
    assert classify_overlap("", voiced_seconds=2.0, final=False).kind == "turn"
    assert classify_overlap("yeah", voiced_seconds=2.0, final=True).kind == "turn"
    assert classify_overlap("", voiced_seconds=0.3, final=True).kind == "noise"
    assert classify_overlap("", voiced_seconds=0.3, final=False).kind == "undecided"


@given(st.lists(st.sampled_from(sorted(" ".join(p) for p in BACKCHANNELS)), min_size=1, max_size=4))
def test_any_run_of_acknowledgements_is_one(phrases: list[str]) -> None:
    heard = ", ".join(phrases) + "."
    assert classify_overlap(heard, voiced_seconds=1.0, final=True).kind == "backchannel"


def _noise(kind: str) -> np.ndarray:
    from voicehub_dev.bench.turns_eval import noise

    return np.frombuffer(noise(kind), dtype="<i2")


@pytest.mark.parametrize("kind", ["cough", "knock", "static"])
def test_a_cough_a_knock_and_static_are_noise(kind: str) -> None:
    assert is_noise_burst(_noise(kind), RATE)


def test_short_words_are_speech() -> None:
    # Piper only: eSpeak NG keeps state across sentences in a process, and other tests of
    # the same worker check that it says a sentence the same way twice
    voice = "piper"
    for word in ("uh-huh", "yeah", "okay", "stop", "no", "wait", "hold on", "mm-hm"):
        samples = np.frombuffer(spoken(word, voice, rate=RATE), dtype="<i2")
        assert not is_noise_burst(samples, RATE), (voice, word, listen_to_burst(samples, RATE))


def test_long_sound_is_never_taken_for_noise() -> None:
    static = np.random.default_rng(3).standard_normal(round(1.5 * RATE)) * 3000
    sound = listen_to_burst(static, RATE)
    assert sound.voiced_share < 0.3 and sound.loud_seconds > MAX_NOISE_SECONDS
    assert not sound.is_noise
    assert listen_to_burst(np.zeros(800), RATE).loud_seconds == 0  # silence: nothing loud
