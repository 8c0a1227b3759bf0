"""Whisper decoding with the encoder's window of a chosen length.

faster-whisper pads every utterance to Whisper's 30 s window before encoding it, so the
encoder costs most of a decoding whatever the utterance. CTranslate2's encoder takes a
shorter window (what whisper.cpp calls the audio context), and its cost falls faster than
the window (attention is quadratic in it). The text is then decoded by faster-whisper's own
public `generate_segments`, handed that encoding, so the prompt, the no-speech probability
and the scores are computed as `transcribe` computes them.

The window is `seconds` long, or the utterance and a second of silence when that is longer
(up to Whisper's 30 s): Whisper was trained on windows padded with silence to 30 s, and it
mishears on windows that leave it little silence after the words. Shorter windows are
faster and mishear more (`docs/speech-recognition.md`). An utterance longer than 30 s is decoded as
faster-whisper decodes it, window after window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voicehub.voice.providers import vendor_import

__all__ = ["FULL_WINDOW", "DecodedSegment", "WindowedDecoder", "window_frames"]

FRAMES_PER_SECOND = 100
"""Whisper's feature frames per second (a hop of 10 ms)."""
FULL_WINDOW = 3000
"""The frames of Whisper's training window (30 s)."""
_SAMPLE_RATE = 16000
_MARGIN = 1.0  # seconds of silence after the longest utterances


@dataclass(frozen=True, slots=True)
class DecodedSegment:
    """What the decoding says of one window: its text and faster-whisper's scores."""

    text: str
    start: float
    end: float
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float


def window_frames(samples: int, *, seconds: float) -> int:
    """The encoder's window, in feature frames, for an utterance of `samples` at 16 kHz."""
    fitted = max(samples / _SAMPLE_RATE + _MARGIN, seconds)
    return min(FULL_WINDOW, math.ceil(fitted * FRAMES_PER_SECOND))


class WindowedDecoder:
    """Decodes utterances on a loaded faster-whisper `WhisperModel` with an encoder window of
    `window` seconds (`window_frames`; 30 and over: Whisper's own, as `transcribe` decodes).
    Thread-safe as the model is (the options and tokenizer are read only)."""

    def __init__(self, model: Any, *, window: float) -> None:
        with vendor_import("faster-whisper"):
            from faster_whisper.tokenizer import Tokenizer
            from faster_whisper.transcribe import get_suppressed_tokens

        self.model = model
        self.window = window
        self._tokenizer = Tokenizer(model.hf_tokenizer, False, task="transcribe", language="en")
        self._suppressed = get_suppressed_tokens(self._tokenizer, [-1])

    def decode(
        self, samples: npt.NDArray[np.float32], *, beam_size: int, prompt: str
    ) -> list[DecodedSegment]:
        """The segments of `samples` (16 kHz, floats in [-1, 1]), greedy at temperature 0 (or
        with a beam), without timestamps, after `prompt`; every segment, unfiltered."""
        with vendor_import("faster-whisper"):
            from faster_whisper.audio import pad_or_trim

        model = self.model
        features = model.feature_extractor(samples)
        frames = window_frames(samples.size, seconds=self.window)
        # `generate_segments` reads the features' last frame as padding: encode as it would.
        content = features[:, : features.shape[-1] - 1]
        encoded = model.encode(pad_or_trim(content, frames))
        options = self._options(beam_size, prompt)
        return [
            DecodedSegment(
                text=segment.text,
                start=float(segment.start),
                end=float(segment.end),
                avg_logprob=float(segment.avg_logprob),
                no_speech_prob=float(segment.no_speech_prob),
                compression_ratio=float(segment.compression_ratio),
            )
            for segment in model.generate_segments(
                features, self._tokenizer, options, False, encoded
            )
        ]

    def _options(self, beam_size: int, prompt: str) -> Any:
        """The options `transcribe` builds for voicehub's arguments (faster-whisper 1.2.1's
        defaults for the rest; the package is pinned)."""
        with vendor_import("faster-whisper"):
            from faster_whisper.transcribe import TranscriptionOptions

        # Greedy at temperature 0 only: the fallback to sampling at higher temperatures
        # makes results differ run to run for no gain in accuracy. No timestamp tokens: a
        # request is one short utterance, and decoding text only mishears less.
        return TranscriptionOptions(
            beam_size=beam_size,
            best_of=5,
            patience=1.0,
            length_penalty=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            log_prob_threshold=-1.0,
            no_speech_threshold=0.6,
            compression_ratio_threshold=2.4,
            condition_on_previous_text=False,
            prompt_reset_on_temperature=0.5,
            temperatures=[0.0],
            initial_prompt=prompt or None,
            prefix=None,
            suppress_blank=True,
            suppress_tokens=self._suppressed,
            without_timestamps=True,
            max_initial_timestamp=1.0,
            word_timestamps=False,
            prepend_punctuations="\"'“¿([{-",
            append_punctuations="\"'.。,，!！?？:：”)]}、",
            multilingual=False,
            max_new_tokens=None,
            clip_timestamps="0",
            hallucination_silence_threshold=None,
            hotwords=None,
        )
