"""Silero's silence gate: plainly silent windows out of speech skip the model, and the
speech segments stay those the model finds running on every window.

The audio is Piper speech (four phrases, pauses from 0.2 to 4.5 s between them) clean,
with faint and audible noise, quiet, on a phone line (G.711), and noise bursts with no
speech.
"""

from __future__ import annotations

import asyncio
import os
from functools import cache
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.voice.providers.offline.test_vad import boundaries, vad_events
from voicehub.voice.audio import lin2ulaw, resample_pcm16, ulaw2lin

RATE = 16000
WINDOW = 512  # samples the model decides at a time (32 ms)
PHRASES = (
    "please research solar panels",
    "what are your opening hours",
    "yes",
    "book me a table for two at seven tonight",
)
PAUSES = (0.2, 0.5, 1.0, 4.5, 0.7)  # s of silence after each utterance


@cache
def utterances() -> tuple[np.ndarray, ...]:
    return tuple(np.frombuffer(spoken(text, rate=RATE), np.int16) for text in PHRASES)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), np.int16)


def conversation(gain: float = 1.0) -> np.ndarray:
    """The caller's side: half a second of silence, then each utterance and its pause."""
    parts = [silence(0.5)]
    for index, pause in enumerate(PAUSES):
        speech = utterances()[index % len(PHRASES)]
        parts += [np.rint(speech * gain).astype(np.int16), silence(pause)]
    return np.concatenate(parts)


def with_noise(samples: np.ndarray, sigma: float, seed: int = 11) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(0, sigma, len(samples))
    return np.clip(samples + np.rint(noise), -32768, 32767).astype(np.int16)


def noise_bursts(seed: int = 3) -> np.ndarray:
    """Clicks and knocks (white noise, 20 to 300 ms, loud) between silences: no speech."""
    rng = np.random.default_rng(seed)
    parts: list[np.ndarray] = []
    for _ in range(12):
        burst = rng.normal(0, 1000, int(rng.uniform(0.02, 0.3) * RATE))
        parts += [silence(rng.uniform(0.2, 2.5)), np.rint(burst).astype(np.int16)]
    return np.concatenate([*parts, silence(1.0)])


def phone_line(samples: np.ndarray) -> bytes:
    """Through an 8 kHz G.711 mu-law line (Twilio's) and back: what a phone call's VAD
    hears, at 8 kHz."""
    return ulaw2lin(lin2ulaw(resample_pcm16(samples.tobytes(), RATE, 8000)))


def segments(events: list[Any]) -> list[tuple[str, int]]:
    return [(e.type.value, e.samples_index) for e in boundaries(events)]


@cache
def vads(model_rate: int = RATE) -> dict[str, Any]:
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroVAD
    from voicehub.voice.providers.offline.silero_model import SileroModel, SileroOptions

    model = SileroModel(model_rate)
    tuned: dict[str, Any] = {
        "min_speech_duration": 0.06,
        "min_silence_duration": 0.35,
        "sample_rate": model_rate,
    }
    gated = SileroVAD(model, SileroOptions(**tuned))
    return {
        "every window": SileroVAD(model, SileroOptions(**tuned, silent_peak_dbfs=None)),
        "gated": gated,
        "batched": BatchedSileroVAD(gated),
    }


async def gated_and_ungated(
    pcm: bytes, rate: int, model_rate: int = RATE
) -> tuple[list[Any], list[Any], float]:
    """The events with and without the gate, and the share of windows it skipped."""
    every = await vad_events(vads(model_rate)["every window"], pcm, rate)
    batched = vads(model_rate)["batched"].for_call()
    batcher = batched.batcher
    before = batcher.skipped, batcher.windows
    gated = await vad_events(batched, pcm, rate)
    skipped, inferred = batcher.skipped - before[0], batcher.windows - before[1]
    return every, gated, skipped / (skipped + inferred)


CASES = {
    # digital silence between utterances: most windows skipped, the same segments exactly
    "clean": lambda: (conversation().tobytes(), RATE, RATE),
    # noise above the gate (-50 and -27 dBFS): nothing skipped, trivially the same
    "noise at -50 dBFS": lambda: (with_noise(conversation(), 100).tobytes(), RATE, RATE),
    "noise at SNR 10 dB": lambda: (with_noise(conversation(), 1500).tobytes(), RATE, RATE),
    # no speech at all: no false alarm either way
    "noise bursts": lambda: (noise_bursts().tobytes(), RATE, RATE),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_gate_keeps_the_speech_segments(case: str) -> None:
    pcm, rate, model_rate = CASES[case]()
    every, gated, skipped = await gated_and_ungated(pcm, rate, model_rate)
    assert segments(gated) == segments(every)
    if case == "noise bursts":
        assert segments(every) == []
    else:  # every utterance heard (the 0.2 s pause joins two; a phone line may split one)
        assert len(segments(every)) >= 2 * (len(PAUSES) - 1)
    # the START and END frames carry the same audio (the pre-roll was kept while skipping)
    assert [e.frames[0].data.tobytes() for e in boundaries(gated)] == [
        e.frames[0].data.tobytes() for e in boundaries(every)
    ]
    if case.startswith("noise at"):
        assert skipped == 0
    else:
        assert skipped > 0.3


NEAR_THE_GATE = {
    "faint noise": lambda: (with_noise(conversation(), 2).tobytes(), RATE, RATE),
    "quiet speech": lambda: (conversation(0.01).tobytes(), RATE, RATE),
    # mu-law turns the speech's faintest stretches into steps of 8 (under the gate)
    "phone line, 8 kHz model": lambda: (phone_line(conversation()), 8000, 8000),
    # resampled to the 16 kHz model: livekit's resampler also dithers the silence (+-1)
    "phone line, 16 kHz model": lambda: (phone_line(conversation()), 8000, RATE),
}


@pytest.mark.parametrize("case", list(NEAR_THE_GATE))
async def test_near_the_gate_segments_move_a_little_at_most(case: str) -> None:
    """Faint noise (peaks at -72 dBFS, under the gate), a phone line's faintest stretches,
    or speech 40 dB quieter (its pauses under the gate): the model's state after skipped
    windows is the silent state's approximation, so boundaries may move, by up to two
    windows (64 ms) for starts, 0.25 s for ends; no segment is lost or added."""
    pcm, rate, model_rate = NEAR_THE_GATE[case]()
    every, gated, skipped = await gated_and_ungated(pcm, rate, model_rate)
    assert skipped > 0.3
    expected, got = segments(every), segments(gated)
    assert [kind for kind, _ in got] == [kind for kind, _ in expected]
    window = WINDOW * model_rate // RATE  # samples_index counts the model's samples
    for (kind, at), (_, reference) in zip(got, expected, strict=True):
        limit = 2 * window if kind == "start_of_speech" else int(0.25 * model_rate)
        assert abs(at - reference) <= limit, (kind, at, reference)


async def test_batched_and_per_call_streams_gate_alike() -> None:
    """Several calls at once through one batcher, each with its own audio: each decides
    as a lone per-call stream (gate on in both) on the same audio."""
    inputs = [CASES[case]()[:2] for case in ("clean", "noise at -50 dBFS", "noise bursts")]
    alone = [await vad_events(vads()["gated"], pcm, rate) for pcm, rate in inputs]
    batched = vads()["batched"]
    together = await asyncio.gather(
        *(vad_events(batched.for_call(), pcm, rate) for pcm, rate in inputs)
    )
    for one, many in zip(alone, together, strict=True):
        assert segments(many) == segments(one)


async def test_audible_windows_are_never_skipped() -> None:
    """Low noise whose peaks pass the gate (-70 dBFS): the model runs on every window."""
    batched = vads()["batched"].for_call()
    before = batched.batcher.skipped
    noise = with_noise(silence(2.0), 6)  # peaks about 20: above the gate's 10
    events = await vad_events(batched, noise.tobytes(), RATE)
    assert batched.batcher.skipped == before
    assert boundaries(events) == []


def test_a_gate_that_would_skip_speech_is_refused() -> None:
    from voicehub.voice.providers.offline.silero_model import SileroOptions

    with pytest.raises(ValueError, match="silent_peak_dbfs=-20 would skip audible speech"):
        SileroOptions(silent_peak_dbfs=-20)
    assert SileroOptions().silent_peak == 10  # -70 dBFS of int16 full scale
    assert SileroOptions(silent_peak_dbfs=None).silent_peak == -1
