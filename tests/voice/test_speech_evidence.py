"""Per-frame speech evidence: real synthesized speech counts, silence and steady noise do
not (after the floor has learned the noise), and chunking does not change the count."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.speech import spoken
from voicehub.voice.audio import frame_bytes
from voicehub.voice.speech_evidence import SpeechEvidence

RATE = 16000
FRAME = frame_bytes(RATE)


@pytest.fixture(scope="module")
def speech() -> bytes:
    pcm = spoken("could you research heat pumps for me please", rate=RATE)
    return pcm[: len(pcm) - len(pcm) % FRAME]


def _noise(seconds: float, rms: float, seed: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    samples = rng.normal(0.0, rms, int(RATE * seconds)).clip(-32768, 32767)
    return samples.astype("<i2").tobytes()


def test_speech_frames_count_and_digital_silence_does_not(speech: bytes) -> None:
    evidence = SpeechEvidence(RATE)
    assert evidence.voiced_frames(bytes(FRAME * 50)) == 0
    voiced = evidence.voiced_frames(speech)
    assert voiced > 0.5 * len(speech) // FRAME  # most of an utterance is voiced


def test_chunk_sizes_do_not_change_the_count(speech: bytes) -> None:
    whole = SpeechEvidence(RATE).voiced_frames(speech)
    pieces = SpeechEvidence(RATE)
    odd = sum(pieces.voiced_frames(speech[i : i + 333]) for i in range(0, len(speech), 333))
    assert odd == whole
    framed = SpeechEvidence(RATE)  # frame by frame: the one-frame path, as a call pushes
    per_frame = [framed.voiced_frames(speech[i : i + FRAME]) for i in range(0, len(speech), FRAME)]
    assert sum(per_frame) == whole and 0 < whole < len(per_frame)


def test_steady_noise_stops_counting_and_speech_over_it_still_counts(speech: bytes) -> None:
    evidence = SpeechEvidence(RATE)
    evidence.voiced_frames(_noise(4.0, 600.0))  # -35 dBFS hiss: learned as the floor
    assert evidence.voiced_frames(_noise(1.0, 600.0, seed=2)) == 0
    loud = (np.frombuffer(speech, "<i2").astype(np.float64) * 1.5).clip(-32768, 32767)
    mixed = loud + np.frombuffer(_noise(len(speech) / 2 / RATE, 600.0, seed=3), "<i2")
    assert evidence.voiced_frames(mixed.clip(-32768, 32767).astype("<i2").tobytes()) > 10


def _exact_decisions(pcm16: bytes) -> list[int]:
    """The decisions on exact integer RMS levels (the reference `hypot` must agree with)."""
    decisions: list[int] = []
    floor = 260.0 / 4.0
    for start in range(0, len(pcm16), FRAME):
        samples = np.frombuffer(pcm16[start : start + FRAME], "<i2").astype(np.int64)
        level = (int(samples.dot(samples)) / len(samples)) ** 0.5
        decisions.append(1 if level > max(260.0, floor * 4.0) else 0)
        floor = level if level < floor else max(floor, 1.0) * 1.015
    return decisions


def test_levels_decide_as_exact_integer_rms(speech: bytes) -> None:
    noisy = np.frombuffer(speech, "<i2") + np.frombuffer(
        _noise(len(speech) / 2 / RATE, 300.0, seed=4), "<i2"
    )
    for audio in (speech, noisy.clip(-32768, 32767).astype("<i2").tobytes(), _noise(2.0, 900)):
        evidence = SpeechEvidence(RATE)
        heard = [evidence.voiced_frames(audio[i : i + FRAME]) for i in range(0, len(audio), FRAME)]
        assert heard == _exact_decisions(audio)
