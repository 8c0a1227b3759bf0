"""Whisper decoding with the encoder's window of a chosen length (`whisper_window`),
on speech synthesized by Piper and eSpeak NG."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.voice.audio import pcm16_to_int16
from voicehub.voice.providers.offline.whisper_engine import shared_recognizer
from voicehub.voice.providers.offline.whisper_window import (
    FULL_WINDOW,
    WindowedDecoder,
    window_frames,
)
from voicehub.voice.turns.words import spoken_words

REQUESTS = (
    ("could you research heat pumps for me please", "piper"),
    ("please find out about wind turbines", "espeak"),
    ("what is the weather like tomorrow", "piper"),
)
KEYWORDS = ({"research", "heat", "pumps"}, {"find", "wind", "turbines"}, {"weather", "tomorrow"})
PROMPT = "heat pumps, wind turbines, solar panels."


@cache
def samples(text: str, voice: str) -> Any:
    pcm = spoken(text, voice, rate=16000)
    return pcm16_to_int16(pcm).astype(np.float32) / 32768.0


def model() -> Any:
    recognizer = shared_recognizer()
    recognizer.prewarm()
    return recognizer.model


@pytest.mark.parametrize(
    ("utterance", "window", "frames"),
    [
        (2.0, 20, 2000),  # the window asked for
        (19.5, 20, 2050),  # the utterance and a second of silence after it
        (29.5, 20, FULL_WINDOW),  # never past Whisper's own
        (2.0, 45, FULL_WINDOW),
        (0.0, 5, 500),
    ],
)
def test_the_window_holds_the_utterance_and_a_second_of_silence(
    utterance: float, window: float, frames: int
) -> None:
    assert window_frames(round(utterance * 16000), seconds=window) == frames


@pytest.mark.slow
def test_the_full_window_decodes_as_transcribe_does() -> None:
    whisper = model()
    decoder = WindowedDecoder(whisper, window=30)
    for text, voice in REQUESTS:
        audio = samples(text, voice)
        expected, _ = whisper.transcribe(
            audio,
            language="en",
            beam_size=1,
            temperature=0.0,
            without_timestamps=True,
            initial_prompt=PROMPT,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        got = decoder.decode(audio, beam_size=1, prompt=PROMPT)
        assert [(s.text, s.avg_logprob, s.no_speech_prob) for s in expected] == [
            (s.text, s.avg_logprob, s.no_speech_prob) for s in got
        ]


class EncoderSpy:
    """The real model, recording the window each encoding was given."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.windows: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def encode(self, features: Any) -> Any:
        self.windows.append(features.shape[-1])
        return self.model.encode(features)

    def generate_segments(self, *args: Any) -> Any:
        return self.model.generate_segments(*args)


def test_a_shorter_window_is_what_the_encoder_reads_and_it_hears_the_requests() -> None:
    spy = EncoderSpy(model())
    shorter = WindowedDecoder(spy, window=20)
    for (text, voice), keywords in zip(REQUESTS, KEYWORDS, strict=True):
        heard = " ".join(
            s.text for s in shorter.decode(samples(text, voice), beam_size=1, prompt=PROMPT)
        )
        assert keywords <= set(spoken_words(heard))
    assert spy.windows == [2000] * len(REQUESTS)
