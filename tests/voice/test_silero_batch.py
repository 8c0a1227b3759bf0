"""Batched Silero VAD decides exactly as per-call Silero on the same audio.

Each call hears the same Piper utterance after a different lead of silence (and a
different tail), so every batch mixes calls at different points of speech and silence.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.voice.test_offline_vad import padded_speech, shared_vad, vad_events

RATE = 16000


def call_audio(index: int) -> bytes:
    speech, _ = padded_speech(RATE)
    lead = bytes(2 * (RATE // 50) * (index % 13))  # 0 to 240 ms more silence first
    return lead + speech


def segments(events: list[Any]) -> list[tuple[str, int]]:
    """Where speech starts and ends, and the speaking flag of each inference."""
    from livekit.agents.vad import VADEventType

    marks = [
        (e.type.value, e.samples_index) for e in events if e.type != VADEventType.INFERENCE_DONE
    ]
    flags = "".join(
        "S" if e.speaking else "." for e in events if e.type == VADEventType.INFERENCE_DONE
    )
    return [*marks, ("flags", hash(flags))]


@pytest.mark.parametrize("calls", [1, 7, 64])
async def test_batched_segments_equal_per_call_segments(calls: int) -> None:
    from livekit.agents.vad import VADEventType

    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    audio = [call_audio(i) for i in range(calls)]
    alone = [await vad_events(shared, pcm, RATE) for pcm in audio]

    batcher = SileroBatcher(shared._onnx_session, RATE, tick=0.002)
    batched_vad = BatchedSileroVAD(shared, batcher)
    together = await asyncio.gather(
        *(vad_events(batched_vad.for_call(), pcm, RATE) for pcm in audio)
    )

    for index, (one, many) in enumerate(zip(alone, together, strict=True)):
        assert any(e.type == VADEventType.START_OF_SPEECH for e in one), index
        assert segments(many) == segments(one), index
        probabilities = [e.probability for e in one if e.type == VADEventType.INFERENCE_DONE]
        batched = [e.probability for e in many if e.type == VADEventType.INFERENCE_DONE]
        assert batched == pytest.approx(probabilities, abs=1e-4), index
    if calls > 1:  # the windows really went through in batches
        assert batcher.windows / batcher.batches > 1.5


@pytest.mark.parametrize("calls", [1, 7, 64])
async def test_server_calls_get_batched_vads_deciding_as_per_call_vads(calls: int) -> None:
    """Through the server's path (`OfflineSessionFactory.call_vad`): batched by default,
    per-call inference with `batch_vad=False`, the same speech segments either way."""
    from livekit.plugins import silero

    from voicehub.desks.voice_stack import OfflineSessionFactory
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD

    batched, per_call = OfflineSessionFactory(), OfflineSessionFactory(batch_vad=False)
    together = [batched.call_vad("silero") for _ in range(calls)]
    alone = per_call.call_vad("silero")
    assert all(isinstance(vad, BatchedSileroVAD) for vad in together)
    assert len({id(vad.batcher) for vad in together}) == 1  # one batcher for every call
    assert len({id(vad) for vad in together}) == calls  # each call its own metrics
    assert isinstance(alone, silero.VAD) and not isinstance(alone, BatchedSileroVAD)

    audio = [call_audio(i) for i in range(calls)]
    expected = [await vad_events(per_call.call_vad("silero"), pcm, RATE) for pcm in audio]
    got = await asyncio.gather(
        *(vad_events(vad, pcm, RATE) for vad, pcm in zip(together, audio, strict=True))
    )
    for index, (one, many) in enumerate(zip(expected, got, strict=True)):
        assert segments(many) == segments(one), index
    batcher = together[0].batcher
    if calls > 1:
        assert batcher.windows / batcher.batches > 1.5
