"""A result still being pre-rendered when the call ends must not keep its driver alive, nor
a pre-rendering whose synthesis was lost keep its result from being spoken."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from voicehub.core.clock import VirtualClock, settle
from voicehub.delivery.injector import InjectOutcome
from voicehub.voice.engine.results import RENDER_STALL, ResultSpeaker
from voicehub.voice.engine.speech import Speech, SpeechEnd
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import tts


class Synthesis:
    """A livekit `ChunkedStream`'s shape: entered, then iterated for its audio (`_chunks`)."""

    async def __aenter__(self) -> Synthesis:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> Any:
        return self._chunks()

    async def _chunks(self) -> Any:
        yield tts.SynthesizedAudio(
            frame=rtc.AudioFrame(bytes(3200), 16000, 1, 1600), request_id="r1"
        )


class StuckStream(Synthesis):
    """A synthesis that never produces audio (a starved TTS thread)."""

    async def _chunks(self) -> Any:
        await asyncio.Event().wait()
        yield  # pragma: no cover  (makes this an async generator)


class StuckVoice:
    capabilities = tts.TTSCapabilities(streaming=False)  # a livekit TTS says

    def synthesize(self, text: str) -> StuckStream:
        return StuckStream()


async def test_cancelling_a_wait_for_a_rendering_cancels_the_waiter() -> None:
    # Regression: the wait suppressed CancelledError, so the delivery driver cancelled at
    # the end of a call carried on, and the call (and its conversation) never finished.
    async def never(text: str, audio: Any) -> Any:
        raise AssertionError("nothing is spoken here")

    speaker = ResultSpeaker(
        cast(Any, None),
        VirtualClock(),
        lambda: cast(Any, StuckVoice()),
        never,
        sample_rate=16000,
    )
    speaker.prepare("dlv-1", "the results on heat pumps")
    waiting = asyncio.create_task(speaker._prerendered("the results on heat pumps", ["dlv-1"]))
    for _ in range(5):
        await asyncio.sleep(0)  # the waiter is parked on the rendering
    assert not waiting.done()
    waiting.cancel()
    await asyncio.wait({waiting})
    assert waiting.cancelled()
    speaker.aclose()


class Answering(Synthesis):
    """A synthesis that answers: one chunk of 0.1 s of audio."""


class LosesItsFirstRequest:
    """A voice whose first synthesis is lost for good (its request never answered); the
    next ones answer."""

    capabilities = tts.TTSCapabilities(streaming=False)

    def __init__(self) -> None:
        self.requests = 0

    def synthesize(self, text: str) -> Any:
        self.requests += 1
        return StuckStream() if self.requests == 1 else Answering()


async def test_a_result_whose_pre_rendering_is_lost_is_synthesized_when_it_is_due() -> None:
    # The faults bench's tts_lost_10s: the wait for the rendering had no end, and the result
    # stayed `delivering` while the call went on (the voice answered its check-ins).
    clock = VirtualClock()
    voice = LosesItsFirstRequest()
    heard: list[bytes] = []

    async def speak_audio(text: str, audio: Any) -> Speech:
        speech = Speech("call-1/speech-x-1", "delivery", text, audio)
        heard.extend([chunk async for chunk in audio])
        speech.finish(SpeechEnd.PLAYED)
        return speech

    speaker = ResultSpeaker(
        cast(Any, None), clock, lambda: cast(Any, voice), speak_audio, sample_rate=16000
    )
    text = "the results on heat pumps"
    speaker.prepare("dlv-1", text)
    speaking = asyncio.create_task(speaker.speak(text, {"delivery_ids": ["dlv-1"]}))
    await settle()
    await clock.advance(RENDER_STALL - 1)
    await settle()
    assert not speaking.done()  # a rendering under way is waited for while it may answer
    await clock.advance(1)
    assert await asyncio.wait_for(speaking, 5) is InjectOutcome.FINISHED
    assert voice.requests == 2 and b"".join(heard) == bytes(3200)
    speaker.aclose()


class Slow(Synthesis):
    """A synthesis that answers slowly: a chunk of 0.1 s every 10 s of the call's clock."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    async def _chunks(self) -> Any:
        for _ in range(3):
            await self.clock.sleep(10)
            async for chunk in super()._chunks():
                yield chunk


async def test_a_slow_pre_rendering_that_keeps_sending_is_waited_for() -> None:
    clock = VirtualClock()
    requests: list[str] = []

    class SlowVoice:
        capabilities = tts.TTSCapabilities(streaming=False)

        def synthesize(self, text: str) -> Slow:
            requests.append(text)
            return Slow(clock)

    heard: list[bytes] = []

    async def speak_audio(text: str, audio: Any) -> Speech:
        speech = Speech("call-1/speech-x-1", "delivery", text, audio)
        heard.extend([chunk async for chunk in audio])
        speech.finish(SpeechEnd.PLAYED)
        return speech

    speaker = ResultSpeaker(
        cast(Any, None), clock, lambda: cast(Any, SlowVoice()), speak_audio, sample_rate=16000
    )
    text = "the results on heat pumps"
    speaker.prepare("dlv-1", text)
    speaking = asyncio.create_task(speaker.speak(text, {"delivery_ids": ["dlv-1"]}))
    for _ in range(40):  # 40 s of call time, a chunk every 10 s: 30 s past one stall's length
        await clock.advance(1)
        await settle()
    assert await asyncio.wait_for(speaking, 5) is InjectOutcome.FINISHED
    assert len(requests) == 1 and b"".join(heard) == bytes(3 * 3200)  # the rendering's own
    speaker.aclose()
