"""A recognizer of whole utterances (no streaming) on the engine: audio kept from a short
pre-roll before speech, recognized at each flush, in order, as final transcripts."""

from __future__ import annotations

import asyncio
from typing import Any

from voicehub.voice.engine.utterance_stream import (
    UtteranceStream,
    finalizes_on_flush,
    recognizer_stream,
)
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt


class CountingSTT:
    """Hears "N frames" for an utterance of N frames; the second one slowly."""

    capabilities = stt.STTCapabilities(streaming=False, interim_results=False)

    def __init__(self) -> None:
        self.calls = 0

    async def recognize(self, frames: list[rtc.AudioFrame]) -> stt.SpeechEvent:
        self.calls += 1
        if self.calls == 2:
            await asyncio.sleep(0.05)  # a slow decode must not let the next one pass it
        text = f"{len(frames)} frames"
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text=text)],  # type: ignore[arg-type]
        )


def frame() -> rtc.AudioFrame:
    return rtc.AudioFrame(bytes(640), 16000, 1, 320)


async def test_utterances_are_cut_by_speech_start_and_flush_and_heard_in_order() -> None:
    recognizer = CountingSTT()
    assert finalizes_on_flush(recognizer)
    stream = recognizer_stream(recognizer)
    assert isinstance(stream, UtteranceStream)
    heard: list[str] = []
    stream.deliver_to(lambda event: heard.append(event.alternatives[0].text))
    for _ in range(100):  # two seconds of silence before the caller speaks
        stream.push_frame(frame())
    stream.speech_started()  # 0.4 s of pre-roll kept
    for _ in range(30):
        stream.push_frame(frame())
    stream.flush()
    for _ in range(5):
        stream.push_frame(frame())
    stream.flush()
    stream.flush()  # nothing since: an empty final, still in order
    for _ in range(50):
        await asyncio.sleep(0.01)
        if len(heard) == 3:
            break
    assert heard == ["50 frames", "5 frames", ""]
    await stream.aclose()


def test_a_streaming_stt_keeps_its_own_stream() -> None:
    class Streaming:
        capabilities = stt.STTCapabilities(streaming=True, interim_results=True)

        def stream(self) -> Any:
            return "its own"

    assert recognizer_stream(Streaming()) == "its own"
    assert not finalizes_on_flush(Streaming())
