"""One Whisper decoding of one short window of audio, with the encoder sized to the audio.

faster-whisper's `transcribe` pads every window to Whisper's 30 seconds before the encoder
runs, so a two-second request costs the encoder as much as half a minute of speech (on
tiny.en, about 370 of the 440 ms of one core such a decoding took). CTranslate2's encoder
takes shorter inputs, so here the features are padded only to `window_frames` (the audio
and a margin of padding, rounded up: `encoder_frames`), then decoded with faster-whisper's
own public pieces (feature extractor, prompt, tokenizer, the model's `generate`), with the
settings `WhisperRecognizer` used through `transcribe`: greedy or beam search at
temperature 0, no timestamps, the same no-speech and repetition checks. The figures the
window was chosen on are in `voicehub.bench.phone` (tool accuracy) and in the module of
`encoder_frames`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from voicehub.voice.providers import vendor_import

__all__ = ["Decoded", "WhisperDecoder", "encoder_frames", "without_repeats"]

FRAMES_PER_SECOND = 100  # Whisper's feature frames (10 ms hop)
MAX_FRAMES = 3000  # Whisper's 30 s window
MIN_WINDOW_SECONDS = 10.0
"""The shortest encoder window. Shorter windows cost less, but tiny.en, trained on 30 s
windows, reads silence after the speech as more speech to come and repeats itself into it
(`without_repeats` cuts that off); under ten seconds it also began to mishear."""
PADDING_SECONDS = 2.0
"""Silence (zero features) after the audio in the window, at least."""

# faster-whisper's defaults for `transcribe`, which `WhisperRecognizer` used before
_NO_SPEECH_THRESHOLD = 0.6
_LOG_PROB_THRESHOLD = -1.0
_MAX_LENGTH = 448  # the model's text context
_HOP = 160  # samples per feature frame
_NEW_TOKENS_BASE = 16
_NEW_TOKENS_PER_SECOND = 12  # fast speech is about 4 words, 6 tokens a second


def encoder_frames(samples: int, sample_rate: int = 16000, min_window: float | None = None) -> int:
    """The encoder window for `samples` of audio: the audio and `PADDING_SECONDS`, at
    least `min_window` (default `MIN_WINDOW_SECONDS`), rounded up to a whole second, at most
    30 s."""
    shortest = MIN_WINDOW_SECONDS if min_window is None else min_window
    seconds = max(shortest, samples / sample_rate + PADDING_SECONDS)
    return min(MAX_FRAMES, math.ceil(seconds) * FRAMES_PER_SECOND)


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one decoding heard: the text (stripped, maybe empty), the mean log-probability
    of its tokens, Whisper's probability that the window held no speech, and how
    repetitive the text is (gzip compression ratio)."""

    text: str
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float

    @property
    def skipped(self) -> bool:
        """faster-whisper's no-speech rule: a window Whisper thinks holds no speech, unless
        its text is likely enough anyway."""
        return (
            self.no_speech_prob > _NO_SPEECH_THRESHOLD and self.avg_logprob <= _LOG_PROB_THRESHOLD
        )


class WhisperDecoder:
    """Decodes windows of 16 kHz float audio on a loaded faster-whisper `WhisperModel`
    (its CTranslate2 model, feature extractor and tokenizer). Thread-safe: the model's
    `generate` and `encode` release the GIL and run on its workers; the rest is numpy."""

    def __init__(self, model: Any, *, min_window: float | None = None) -> None:
        with vendor_import("faster-whisper"):
            from faster_whisper.tokenizer import Tokenizer
            from faster_whisper.transcribe import get_suppressed_tokens

        self._model = model
        self._min_window = min_window
        self._tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language="en"
        )
        self._suppressed = list(get_suppressed_tokens(self._tokenizer, [-1]) or [])
        self._prompts: dict[str, list[int]] = {}

    def decode(self, samples: np.ndarray, *, prompt: str = "", beam_size: int = 1) -> Decoded:
        """One decoding of `samples` (16 kHz float32, up to 30 s) with `prompt` as the
        previous text, at temperature 0, without timestamps."""
        with vendor_import("faster-whisper"):
            from faster_whisper.transcribe import get_compression_ratio

        model = self._model
        window = encoder_frames(samples.size, min_window=self._min_window)
        # Silence after the audio, as Whisper was trained on (its 30 s windows are padded
        # with silent samples): zero features instead made tiny.en repeat itself to the end
        # of a short window.
        audio = np.zeros(window * _HOP, dtype=np.float32)
        audio[: min(samples.size, audio.size)] = samples[: audio.size]
        features = model.feature_extractor(audio, padding=0)[:, :window]
        encoded = model.encode(np.ascontiguousarray(features[None]))
        tokens = self._prompt_tokens(prompt)
        # A window of t seconds holds at most a few words a second; a longer text is a
        # repetition loop (dropped below), and generating it would cost the most.
        new_tokens = _NEW_TOKENS_BASE + math.ceil(samples.size / 16000 * _NEW_TOKENS_PER_SECOND)
        result = model.model.generate(
            encoded,
            [tokens],
            beam_size=beam_size,
            patience=1.0,
            length_penalty=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            max_length=min(_MAX_LENGTH, len(tokens) + new_tokens),
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self._suppressed,
        )[0]
        ids = result.sequences_ids[0]
        cumulative = result.scores[0] * len(ids)  # the score is per token (length penalty 1)
        text = without_repeats(self._tokenizer.decode(ids).strip())
        return Decoded(
            text=text,
            avg_logprob=cumulative / (len(ids) + 1),
            no_speech_prob=float(result.no_speech_prob),
            compression_ratio=get_compression_ratio(text) if text else 0.0,
        )

    def _prompt_tokens(self, prompt: str) -> list[int]:
        """The decoder's start: the previous text (`prompt`), then English, transcribe, no
        timestamps (kept per prompt: a desk decodes with one or two)."""
        tokens = self._prompts.get(prompt)
        if tokens is None:
            previous = self._tokenizer.encode(" " + prompt.strip()) if prompt.strip() else []
            tokens = self._model.get_prompt(self._tokenizer, previous, without_timestamps=True)
            self._prompts[prompt] = tokens
        return list(tokens)


_WORD = re.compile(r"[A-Za-z0-9']+")
_SENTENCE_END = re.compile(r"[.?!]\s")


def without_repeats(text: str) -> str:
    """`text` cut where Whisper starts repeating itself ("Are they done yet? Are they done
    yet? Are" -> "Are they done yet?"): at the first of

    - three words in a row it already said (two at the very end),
    - a sentence starting with the first two words of the text,
    - a word said before and then again twice in a row, or one word three times in a row
      ("Hello, can you hear me? Hello? Hello?"; "Hello, hello, hello": one is kept).

    A caller rarely says any of these within one request; a decoder that reads the
    silence after the speech as more to come says them."""
    words = [(m.group().lower(), m.start()) for m in _WORD.finditer(text)]
    said = [word for word, _ in words]
    starts = {m.end() for m in _SENTENCE_END.finditer(text)}
    for index in range(1, len(said)):
        run = said[index : index + 3]
        word = said[index]
        again = said[index : index + 2] == [word, word]
        if (
            (len(run) >= 2 and _said_before(said, index, run))
            or (words[index][1] in starts and said[index : index + 2] == said[:2])
            or (again and word in said[:index])
            or (again and said[index - 1] == word)
        ):
            return text[: words[index][1]].rstrip(" ,;:-")
    return text


def _said_before(said: list[str], index: int, run: list[str]) -> bool:
    """Whether the words `run` (at `index`) already came, whole, before `index`."""
    size = len(run)
    return any(said[start : start + size] == run for start in range(0, index - size + 1))
