"""Caller audio to the model in 60 ms batches, with pauses in a turn flushed at once."""

from __future__ import annotations

import numpy as np

from voicehub.voice.audio import frame_bytes
from voicehub.voice.providers.offline import synthesize
from voicehub.voice.realtime.audio_batch import AudioBatcher

RATE = 16000
FRAME = frame_bytes(RATE)  # 20 ms
SILENCE = bytes(FRAME)


def frames(pcm: bytes) -> list[bytes]:
    whole = len(pcm) // FRAME * FRAME
    return [pcm[i : i + FRAME] for i in range(0, whole, FRAME)]


def test_three_frames_make_one_batch_at_24_khz() -> None:
    batcher = AudioBatcher(RATE)
    speech = frames(synthesize("hello there", voice="piper", sample_rate=RATE))[:30]
    batches = [b for b in (batcher.push(f) for f in speech) if b is not None]
    assert len(batches) == 10  # one append per 60 ms, not one per frame
    total = sum(len(b) for b in batches) + len(batcher.flush())
    # 600 ms at 24 kHz PCM16 (the streaming resampler holds back a few samples)
    assert abs(total - 2 * 24000 * 0.6) < 2 * 24000 * 0.02


def test_in_a_turn_a_quiet_frame_flushes_at_once() -> None:
    batcher = AudioBatcher(RATE)
    loud = (np.sin(np.arange(FRAME // 2) / 3) * 8000).astype(np.int16).tobytes()
    assert batcher.push(loud) is None and batcher.push(SILENCE) is None  # outside a turn
    batcher.flush()
    batcher.in_turn = True
    assert batcher.push(loud) is None  # speech still batches
    flushed = batcher.push(SILENCE)  # a pause: the speech and the pause go now
    assert flushed is not None and len(flushed) > 2 * FRAME
    assert batcher.push(SILENCE)  # every quiet frame of the turn goes at once


def test_reset_drops_what_waits() -> None:
    batcher = AudioBatcher(RATE)
    batcher.in_turn = True
    batcher.push(b"\x10\x27" * (FRAME // 2))
    batcher.reset()
    assert batcher.flush() == b"" and not batcher.in_turn
