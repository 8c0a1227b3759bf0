"""Batched Silero VAD decides exactly as per-call Silero on the same audio.

Each call hears the same Piper utterance after a different lead of silence (and a
different tail), so every batch mixes calls at different points of speech and silence.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.voice.providers.offline.test_vad import padded_speech, shared_vad, vad_events

RATE = 16000


def call_audio(index: int, rate: int = RATE) -> bytes:
    speech, _ = padded_speech(rate)
    lead = bytes(2 * (rate // 50) * (index % 13))  # 0 to 240 ms more silence first
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


@pytest.mark.slow
@pytest.mark.parametrize("calls", [1, 7, 64])
async def test_batched_segments_equal_per_call_segments(calls: int) -> None:
    from livekit.agents.vad import VADEventType

    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    audio = [call_audio(i) for i in range(calls)]
    alone = [await vad_events(shared, pcm, RATE) for pcm in audio]

    # a batch's streams decide a few per loop step: 64 calls take several steps
    batcher = SileroBatcher(shared.silero_model, tick=0.002, decide_per_step=20)
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


async def test_batched_streams_resample_as_livekit_does() -> None:
    """8 kHz calls (a phone line) on the 16 kHz model: resampled, then decided the same
    (to a window: livekit's resampler dithers, differently from run to run)."""
    from tests.voice.providers.offline.test_vad import assert_same_segments_near
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    audio = [call_audio(i, 8000) for i in range(5)]
    alone = [await vad_events(shared, pcm, 8000) for pcm in audio]
    batched_vad = BatchedSileroVAD(shared, SileroBatcher(shared.silero_model, tick=0.002))
    together = await asyncio.gather(
        *(vad_events(batched_vad.for_call(), pcm, 8000) for pcm in audio)
    )
    for one, many, pcm in zip(alone, together, audio, strict=True):
        assert_same_segments_near(many, one, pcm)


async def test_a_flush_is_a_boundary_in_audio_order() -> None:
    """Frames pushed around a flush: decided as livekit's stream decides them, although
    windows before the flush are still waiting for their batch when it comes."""
    from livekit import rtc

    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    pcm = call_audio(3)
    cut = len(pcm) // 2 // 640 * 640 + 200  # mid-speech, mid-window, mid-frame

    async def events(vad: Any) -> list[Any]:
        stream = vad.stream()
        for index, part in enumerate((pcm[:cut], pcm[cut:])):
            for start in range(0, len(part), 640):
                chunk = part[start : start + 640]
                stream.push_frame(rtc.AudioFrame(chunk, RATE, 1, len(chunk) // 2))
            if index == 0:
                stream.flush()
        stream.end_input()
        try:
            return [event async for event in stream]
        finally:
            await stream.aclose()

    alone = await events(shared)
    batched = await events(BatchedSileroVAD(shared, SileroBatcher(shared.silero_model)))
    assert segments(batched) == segments(alone)
    assert sum(e.samples_index == 512 for e in alone) == 2  # the flush restarted the count


@pytest.mark.slow
@pytest.mark.parametrize("calls", [1, 7, 64])
async def test_server_calls_get_batched_vads_deciding_as_per_call_vads(calls: int) -> None:
    """Through the server's path (`PipelineResources.call_vad`): batched by default,
    per-call inference with `batch_vad=False`, the same speech segments either way."""
    from voicehub.desks.offline_stack import PipelineResources
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroVAD

    batched, per_call = PipelineResources(), PipelineResources(batch_vad=False)
    together = [batched.call_vad("silero") for _ in range(calls)]
    alone = per_call.call_vad("silero")
    assert all(isinstance(vad, BatchedSileroVAD) for vad in together)
    assert len({id(vad.batcher) for vad in together}) == 1  # one batcher for every call
    assert len({id(vad) for vad in together}) == calls  # each call its own metrics
    assert isinstance(alone, SileroVAD) and not isinstance(alone, BatchedSileroVAD)

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


async def test_each_stream_has_its_own_row_of_model_state_reused_once_it_is_gone() -> None:
    import gc

    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    batcher = SileroBatcher(shared.silero_model, tick=0.002)
    vad = BatchedSileroVAD(shared, batcher)
    streams = [vad.stream() for _ in range(20)]  # more than the first 16 rows: the banks grow
    assert len({stream.detector.slot for stream in streams}) == 20
    gone = streams.pop(3)
    slot = gone.detector.slot
    batcher._contexts[slot] = 0.5  # what its last window left
    batcher._states[:, slot] = 0.5
    await gone.aclose()
    del gone
    gc.collect()
    fresh = vad.stream()
    assert fresh.detector.slot == slot  # reused, and zeroed: a new stream starts from nothing
    assert not batcher._contexts[slot].any() and not batcher._states[:, slot].any()
    for stream in [*streams, fresh]:
        await stream.aclose()


async def test_ticks_count_from_the_latest_batch_not_from_the_next_window() -> None:
    # Counted from the first window after a batch came back, a batch that takes half a tick
    # stretches the cycle past a window's 32 ms at a few hundred calls: windows pile up.
    from livekit import rtc

    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = shared_vad("silero")
    tick = 30.0  # long: no timer fires by itself while the test looks at it
    batcher = SileroBatcher(shared.silero_model, tick=tick)
    vad = BatchedSileroVAD(shared, batcher)
    first, second, third = (vad.stream() for _ in range(3))
    noise = np.random.default_rng(5).normal(0, 3000, 512).astype(np.int16)
    window = rtc.AudioFrame(noise.tobytes(), RATE, 1, 512)  # one 32 ms window, not silent
    loop = asyncio.get_running_loop()
    first.push_frame(window)  # no batch yet: its window need not wait for a tick
    assert batcher._timer is not None and batcher._timer.when() <= loop.time()
    await asyncio.wait_for(anext(first), timeout=60)  # its INFERENCE_DONE: decided
    started = batcher._last_batch
    assert batcher.batches == 1 and started <= loop.time()
    second.push_frame(window)
    assert batcher._timer is not None
    assert batcher._timer.when() == started + tick  # not its own arrival + tick
    third.push_frame(window)
    assert batcher._timer.when() == started + tick  # the batch it joins
    for stream in (first, second, third):
        await stream.aclose()
