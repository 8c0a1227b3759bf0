"""A result still being pre-rendered when the call ends must not keep its driver alive."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from voicehub.core.clock import VirtualClock
from voicehub.voice.engine.results import ResultSpeaker
from voicehub.voice.providers import vendor_import

with vendor_import("livekit-agents"):
    from livekit.agents import tts


class StuckStream:
    """A synthesis that never produces audio (a starved TTS thread)."""

    async def __aenter__(self) -> StuckStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> StuckStream:
        return self

    async def __anext__(self) -> Any:
        await asyncio.Event().wait()


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
