"""Moonshine recognition without livekit: :class:`MoonshineRecognizer`.

Moonshine Base English (61M parameters, `moonshine_model`) is an encoder and a decoder on
onnxruntime. Unlike Whisper's fixed 30 s window, its encoder reads only the utterance (about
20 ms of one core per second of audio on an AVX-512 EPYC), and the decoder writes a token in
about 10 ms. A decoding can be given a draft, the tokens of an earlier decoding of the
same utterance's start (the stream's decoding at the caller's last pause): the decoder
reads the whole draft in one pass, keeps the part it would have written itself, and only
writes on from there, so the final after the end of speech costs the encoder and a few
tokens (`recognize(draft=...)`). The guards of `moonshine_guards` hold on every decoding.

Decodings run on the recognizer's `DecodeQueue` (onnxruntime releases the GIL while it
runs), one thread each: one thread per decoding is the fastest, decoders side by side
the way to use more cores.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.voice.audio import pcm16_to_int16, resample_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decode_queue import DecodeQueue
from voicehub.voice.providers.offline.moonshine_guards import pieces, repeating_tail, token_budget
from voicehub.voice.providers.offline.moonshine_model import (
    MoonshineFiles,
    MoonshineModelError,
    converted_files,
)
from voicehub.voice.providers.offline.whisper_engine import WhisperTranscript

__all__ = ["SAMPLE_RATE", "Decoding", "MoonshineRecognizer", "read_tokenizer"]

SAMPLE_RATE = 16000
_START, _END = 1, 2  # the decoder's start and end-of-text tokens
_SPECIAL = 3  # tokens below are markers, not text
_LAYERS, _HEADS, _HEAD_SIZE = 8, 8, 52
_SPACE = "\u2581"  # SentencePiece's word boundary
_DOUBTFUL = 0.2
"""The confidence of a decoding a guard stopped (a loop, or out of tokens): whatever reads
confidence (a second opinion) should not believe it."""


@dataclass(frozen=True, slots=True)
class Decoding:
    """One piece's tokens, their mean log-probability, and how many the decoder wrote
    itself (the rest came from the draft, read in one pass)."""

    tokens: tuple[int, ...]
    mean_logprob: float
    written: int
    stopped: bool  # a guard ended it (a loop, or the token budget)


def read_tokenizer(path: Path) -> list[bytes]:
    """The token texts of `tokenizer.bin`: each a length byte (under 128) and that many
    bytes, in token order."""
    data = path.read_bytes()
    texts: list[bytes] = []
    at = 0
    while at < len(data):
        size = data[at]
        if size >= 128 or at + 1 + size > len(data):
            raise MoonshineModelError(f"{path} is not a Moonshine tokenizer (at byte {at})")
        texts.append(data[at + 1 : at + 1 + size])
        at += 1 + size
    return texts


class MoonshineRecognizer:
    """The loaded model; :meth:`recognize` is blocking and thread-safe. Streams hand their
    decodings to :attr:`queue` (`workers` threads, one core each)."""

    def __init__(
        self,
        files: MoonshineFiles | None = None,
        *,
        workers: int = 1,
        cache: Path | None = None,
        model: _Model | None = None,
    ) -> None:
        self._files = files
        self._cache = cache
        self.queue = DecodeQueue(workers, second_lane=1, name="moonshine")
        """Where streams decode (most urgent first, `decode_queue`); second opinions on
        its finals (`moonshine_stt`) run on the queue's second lane, one thread."""
        self._lock = threading.Lock()
        self._model = model  # loaded from `files` (or the cache) on first use when None

    def prewarm(self) -> None:
        """Check, convert if needed (once, about 20 s) and load the model now."""
        self._load()

    def _load(self) -> _Model:
        with self._lock:
            if self._model is None:
                files = self._files or converted_files(self._cache)
                self._model = _Model(files)
            return self._model

    def recognize(
        self, pcm16: bytes, sample_rate: int, *, draft: Sequence[int] = ()
    ) -> WhisperTranscript:
        """The words of one utterance (any rate; resampled to 16 kHz). `draft`: the tokens
        of an earlier decoding of this utterance's start, verified in one pass."""
        model = self._load()
        audio = resample_pcm16(pcm16, sample_rate, SAMPLE_RATE)
        samples = pcm16_to_int16(audio).astype(np.float32) / 32768.0
        if samples.size < SAMPLE_RATE // 10:  # under 100 ms: nothing to say
            return WhisperTranscript("", 0.0, 0.0, 0.0)
        cuts = pieces(samples, SAMPLE_RATE)
        decodings = [
            model.decode(samples[start:end], draft if len(cuts) == 1 else ()) for start, end in cuts
        ]
        tokens = tuple(token for d in decodings for token in d.tokens)
        text = model.text(tokens)
        if not text:
            return WhisperTranscript("", 0.0, 0.0, 0.0)
        counted = [d for d in decodings if d.tokens]
        confidence = float(np.exp(np.mean([d.mean_logprob for d in counted])))
        if any(d.stopped for d in decodings):
            confidence = min(confidence, _DOUBTFUL)
        return WhisperTranscript(
            text,
            min(1.0, confidence),
            0.0,
            samples.size / SAMPLE_RATE,
            tokens=tokens if len(cuts) == 1 else (),
        )

    def decode(self, samples: np.ndarray, draft: Sequence[int] = ()) -> Decoding:
        """One piece of 16 kHz float audio decoded (the guards applied)."""
        return self._load().decode(samples, draft)


class _Model:
    """The two onnxruntime sessions and the token texts."""

    def __init__(self, files: MoonshineFiles) -> None:
        with vendor_import("onnxruntime"):
            import onnxruntime as ort

        def session(path: Path) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        self._encoder = session(files.encoder)
        self._decoder = session(files.decoder)
        self._texts = read_tokenizer(files.tokenizer)
        self._outputs = [output.name for output in self._decoder.get_outputs()]
        self._past = [i.name for i in self._decoder.get_inputs() if i.name.startswith("past_")]
        if len(self._past) != 4 * _LAYERS:
            raise MoonshineModelError(f"{files.decoder} is not Moonshine Base's decoder")

    def text(self, tokens: Sequence[int]) -> str:
        raw = b"".join(self._texts[t] for t in tokens if _SPECIAL <= t < len(self._texts))
        return " ".join(raw.decode("utf-8", "replace").replace(_SPACE, " ").split())

    def decode(self, samples: np.ndarray, draft: Sequence[int]) -> Decoding:
        hidden = self._encoder.run(None, {"input_values": samples[None, :]})[0]
        budget = token_budget(samples.size / SAMPLE_RATE)
        draft = list(draft)[:budget]
        empty = np.zeros((1, _HEADS, 0, _HEAD_SIZE), np.float32)
        feed: dict[str, Any] = {name: empty for name in self._past}
        feed.update(
            input_ids=np.array([[_START, *draft]], np.int64),
            encoder_hidden_states=hidden,
            use_cache_branch=np.array([False]),
        )
        first = self._decoder.run(None, feed)
        logprobs = _log_softmax(first[0][0])
        choices = logprobs.argmax(-1)
        kept = 0
        while kept < len(draft) and choices[kept] == draft[kept]:
            kept += 1
        tokens = draft[:kept]
        scores = [float(logprobs[i, tokens[i]]) for i in range(kept)]
        cache = dict(zip(self._outputs[1:], first[1:], strict=True))
        for name in cache:
            if ".decoder." in name:  # the draft's tokens after the first wrong one go
                cache[name] = cache[name][:, :, : kept + 1]
        token, score = int(choices[kept]), float(logprobs[kept, choices[kept]])
        stopped = False
        while token != _END:
            tokens.append(token)
            scores.append(score)
            if (cut := repeating_tail(tokens)) is not None:
                del tokens[cut:], scores[cut:]
                stopped = True
                break
            if len(tokens) >= budget:
                stopped = True
                break
            feed = {name: cache[name.replace("past_key_values", "present")] for name in self._past}
            feed.update(
                input_ids=np.array([[token]], np.int64),
                encoder_hidden_states=hidden,
                use_cache_branch=np.array([True]),
            )
            step = self._decoder.run(None, feed)
            for name, value in zip(self._outputs[1:], step[1:], strict=True):
                if ".decoder." in name:
                    cache[name] = value
            row = _log_softmax(step[0][0, -1])
            token = int(row.argmax())
            score = float(row[token])
        mean = float(np.mean(scores)) if scores else 0.0
        return Decoding(tuple(tokens), mean, len(tokens) - kept, stopped)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: np.ndarray = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return result
