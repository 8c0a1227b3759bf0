"""Caller audio to the model in batches: the start of speech at once, speech in 60 ms,
quiet audio in 120 ms, pauses in a turn at once."""

from __future__ import annotations

from tests.support.speech import spoken
from voicehub.voice.audio import frame_bytes
from voicehub.voice.realtime.audio_batch import AudioBatcher
from voicehub.voice.speech_evidence import SpeechEvidence

RATE = 16000
FRAME = frame_bytes(RATE)  # 20 ms
SILENCE = bytes(FRAME)
MODEL_FRAME = 2 * 24000 // 50  # 20 ms at 24 kHz


def frames(pcm: bytes) -> list[bytes]:
    whole = len(pcm) // FRAME * FRAME
    return [pcm[i : i + FRAME] for i in range(0, whole, FRAME)]


def test_quiet_audio_goes_in_120_ms_batches_at_24_khz() -> None:
    batcher = AudioBatcher(RATE)
    batches = [b for b in (batcher.push(SILENCE, False) for _ in range(30)) if b is not None]
    assert len(batches) == 5  # one append per 120 ms
    total = sum(len(b) for b in batches) + len(batcher.flush())
    # 600 ms at 24 kHz PCM16 (the streaming resampler holds back a few samples)
    assert abs(total - 30 * MODEL_FRAME) < MODEL_FRAME


def test_the_start_of_speech_goes_at_once_then_speech_in_60_ms_batches() -> None:
    speech = frames(spoken("hello there, how are you", rate=RATE))
    evidence = SpeechEvidence(RATE)
    voiced = [evidence.voiced_frames(frame) > 0 for frame in speech]
    first = voiced.index(True)
    batcher = AudioBatcher(RATE)
    assert all(batcher.push(frame, False) is None for frame in speech[: min(first, 5)])
    onset = batcher.push(speech[first], True)  # what waited goes with it, now
    assert onset is not None and len(onset) >= MODEL_FRAME * min(first, 5)
    sent = [batcher.push(SILENCE, True) for _ in range(6)]  # still speech-like
    assert [b is not None for b in sent] == [False, False, True] * 2


def test_in_a_turn_a_quiet_frame_flushes_at_once() -> None:
    batcher = AudioBatcher(RATE)
    batcher.in_turn = True
    assert batcher.push(SILENCE, True) is not None  # an onset
    assert batcher.push(SILENCE, True) is None  # speech still batches
    flushed = batcher.push(SILENCE, False)  # a pause: the speech and the pause go now
    assert flushed is not None and len(flushed) > MODEL_FRAME
    assert batcher.push(SILENCE, False)  # every quiet frame of the turn goes at once


def test_reset_drops_what_waits() -> None:
    batcher = AudioBatcher(RATE)
    batcher.in_turn = True
    batcher.push(b"\x10\x27" * (FRAME // 2), False)
    batcher.reset()
    assert batcher.flush() == b"" and not batcher.in_turn


def test_at_the_models_rate_batches_are_the_frames_as_they_came_and_stay_so() -> None:
    batcher = AudioBatcher(24000)
    pushed = [bytes([k]) * MODEL_FRAME for k in range(1, 13)]
    batches = [b for b in (batcher.push(frame, False) for frame in pushed) if b is not None]
    assert [bytes(b) for b in batches] == [b"".join(pushed[:6]), b"".join(pushed[6:])]
    batcher.push(b"\x7f" * MODEL_FRAME, True)  # later audio leaves a batch handed over intact
    assert bytes(batches[0]) == b"".join(pushed[:6])


def test_a_phone_lines_batches_are_its_mulaw() -> None:
    from voicehub.voice.audio import lin2ulaw

    batcher = AudioBatcher(8000, mulaw=True)
    speech = spoken("hello there", rate=8000)
    pushed = [speech[i : i + 320] for i in range(0, len(speech) // 320 * 320, 320)]
    sent = b"".join(b for b in (batcher.push(frame, True) for frame in pushed) if b is not None)
    assert sent + batcher.flush() == lin2ulaw(b"".join(pushed))
