"""Our VAD streams say when the caller pauses inside their speech (`watch_pause`), before
the VAD's end of speech: the engine starts the end-of-turn model there."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from tests.voice.providers.offline.test_vad import frames

RATE = 16000
KINDS = ["silero", "batched silero", "webrtc"]


def make_vad(kind: str, min_silence: float) -> Any:
    from voicehub.voice.providers.offline import load_vad
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD

    vad = load_vad(kind.split()[-1], min_silence_duration=min_silence)  # type: ignore[arg-type]
    return BatchedSileroVAD(vad) if kind == "batched silero" else vad


def silence(seconds: float) -> bytes:
    return bytes(2 * int(seconds * RATE))


async def watched(kind: str, pcm: bytes, after: float, min_silence: float) -> list[Any]:
    """The pause reports and speech boundaries of `pcm`, in order: True / False for the
    pause watch, the event type's name for START_OF_SPEECH and END_OF_SPEECH."""
    from livekit.agents.vad import VADEventType

    seen: list[Any] = []
    stream = make_vad(kind, min_silence).stream()
    stream.deliver_to(
        lambda e: seen.append(e.type.name) if e.type != VADEventType.INFERENCE_DONE else None,
        inferences="none",
    )
    stream.watch_pause(after, seen.append)
    for frame in frames(pcm, RATE):
        stream.push_frame(frame)
    stream.end_input()
    try:
        await asyncio.wait_for(stream.finished, timeout=60)
    finally:
        await stream.aclose()
    return seen


@pytest.mark.parametrize("kind", KINDS)
async def test_a_pause_is_reported_before_the_end_of_speech(kind: str) -> None:
    pcm = silence(0.5) + spoken("please research solar panels", rate=RATE) + silence(1.0)
    seen = await watched(kind, pcm, after=0.1, min_silence=0.3)
    assert seen == ["START_OF_SPEECH", True, "END_OF_SPEECH"]


@pytest.mark.parametrize("kind", KINDS)
async def test_speech_after_a_pause_is_reported_and_the_next_pause_again(kind: str) -> None:
    words = spoken("please research solar panels", rate=RATE)
    pcm = silence(0.5) + words + silence(0.45) + words + silence(1.5)
    seen = await watched(kind, pcm, after=0.1, min_silence=1.0)
    # one speech for the VAD (its silence is 1 s), two pauses inside it
    assert seen == ["START_OF_SPEECH", True, False, True, "END_OF_SPEECH"]


async def test_a_pause_longer_than_the_vads_silence_comes_with_its_end() -> None:
    pcm = silence(0.5) + spoken("please research solar panels", rate=RATE) + silence(1.0)
    seen = await watched("webrtc", pcm, after=0.5, min_silence=0.3)
    assert seen == ["START_OF_SPEECH", "END_OF_SPEECH"]


def test_a_bad_pause_silence_is_named() -> None:
    async def build() -> None:
        stream = make_vad("webrtc", 0.3).stream()
        try:
            with pytest.raises(ValueError, match="after must be a positive number"):
                stream.watch_pause(0, lambda paused: None)
        finally:
            await stream.aclose()

    asyncio.run(build())
