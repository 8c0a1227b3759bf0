"""A call's recognizer stream outlives the provider streams that fail under it: a new one
is opened (at once, then backing off on the call's clock while new ones keep failing), the
finals the failed one owed are answered empty, and the caller is heard again. Unit tests on
fake streams, then the real pipeline session (Silero VAD, Piper) on a virtual clock."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.agents.agent import Agent
from voicehub.agents.scripted import ScriptedLLM
from voicehub.core.clock import VirtualClock, settle
from voicehub.core.events import EventKind
from voicehub.hub import Hub
from voicehub.testing import MemoryTransport
from voicehub.voice.audio import frame_bytes
from voicehub.voice.engine.utterance_stream import UtteranceStream
from voicehub.voice.events import UserState
from voicehub.voice.providers import vendor_import
from voicehub.voice.providers.offline import PiperTTS, load_vad
from voicehub.voice.providers.recovering_stream import (
    FIRST_DELAY,
    QUIET_LIMIT,
    STEADY_AFTER,
    RecoveringRecognizeStream,
)
from voicehub_dev.fakes.utterance_stt import UtteranceRecognizer
from voicehub_dev.fakes.voice_providers import pipeline_session

with vendor_import("livekit-agents"):
    from livekit import rtc
    from livekit.agents import stt
    from livekit.agents.language import LanguageCode


def final(text: str) -> stt.SpeechEvent:
    return stt.SpeechEvent(
        type=stt.SpeechEventType.FINAL_TRANSCRIPT,
        alternatives=[stt.SpeechData(language=LanguageCode("en"), text=text)],
    )


def frame() -> rtc.AudioFrame:
    return rtc.AudioFrame(bytes(640), 16000, 1, 320)


class DirectStream:
    """A provider stream handing its events to a callback; `fail()` ends it, as a broken
    plugin's stream: it refuses the next frame."""

    def __init__(self) -> None:
        self.sink: Callable[[stt.SpeechEvent], None] | None = None
        self.frames = 0
        self.failed = self.closed = False
        self.finals_owed = 0

    def deliver_to(self, sink: Callable[[stt.SpeechEvent], None]) -> None:
        self.sink = sink

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        if self.failed:
            raise RuntimeError("the stream is closed")
        self.frames += 1

    def flush(self) -> None:
        self.finals_owed += 1

    def flush_ended(self, behind: float) -> None:
        self.flush()

    def speech_started(self) -> None:
        pass

    def say(self, text: str) -> None:
        assert self.sink is not None
        self.sink(final(text))

    async def aclose(self) -> None:
        self.closed = True


class IteratedStream:
    """A livekit-like stream read by iterating it; `fail(error)` ends its events so."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.frames = 0

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self.frames += 1

    def flush(self) -> None:
        pass

    def __aiter__(self) -> AsyncIterator[stt.SpeechEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[stt.SpeechEvent]:
        while self.error is None:
            await settle(1)
        raise self.error
        yield final("")  # pragma: no cover  (makes this an async generator)

    async def aclose(self) -> None:
        pass


class Opener:
    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.streams: list[Any] = []

    def __call__(self) -> Any:
        self.streams.append(self.make())
        return self.streams[-1]


async def test_a_failed_stream_is_replaced_at_once_and_its_owed_finals_answered_empty() -> None:
    clock, opener, heard = VirtualClock(), Opener(DirectStream), []
    stream = RecoveringRecognizeStream(opener, clock)
    stream.deliver_to(lambda event: heard.append(event.alternatives[0].text))
    first = opener.streams[0]
    stream.push_frame(frame())
    first.say("hello")
    stream.flush()  # an utterance ended: the provider owes its final
    first.failed = True
    stream.push_frame(frame())  # refused: the provider's stream is over
    assert heard == ["hello", ""]  # the owed final, answered empty: nobody waits for it
    await settle()
    assert len(opener.streams) == 2 and first.closed and stream.reopened == 1
    second = opener.streams[1]
    stream.push_frame(frame())
    second.say("heat pumps")
    first.say("late words of the failed stream")  # not heard
    assert heard == ["hello", "", "heat pumps"] and second.frames == 1


async def test_streams_that_keep_failing_are_reopened_later_and_later() -> None:
    clock, opener = VirtualClock(), Opener(DirectStream)
    stream = RecoveringRecognizeStream(opener, clock)
    stream.deliver_to(lambda event: None)
    await clock.advance(STEADY_AFTER)  # the first stream lived: its failure is reopened at once
    for count, delay in ((1, 0.0), (2, FIRST_DELAY), (3, 2 * FIRST_DELAY)):
        opener.streams[-1].failed = True
        stream.push_frame(frame())
        await settle()
        if delay:
            assert len(opener.streams) == count  # not yet
            stream.push_frame(frame())  # between streams: not heard, no error
            await clock.advance(delay - 0.01)
            await settle()
            assert len(opener.streams) == count
            await clock.advance(0.01)
            await settle()
        assert len(opener.streams) == count + 1


async def test_an_iterated_stream_whose_events_end_with_an_error_is_replaced() -> None:
    clock, opener = VirtualClock(), Opener(IteratedStream)
    stream = RecoveringRecognizeStream(opener, clock)
    stream.deliver_to(lambda event: None)
    opener.streams[0].error = ConnectionError("the recognizer's socket broke")
    await settle()
    assert len(opener.streams) == 2
    stream.push_frame(frame())
    assert opener.streams[1].frames == 1
    await stream.aclose()


async def frames_for(
    stream: RecoveringRecognizeStream, clock: VirtualClock, seconds: float
) -> None:
    """`seconds` of caller audio, one 20 ms frame at a time on the call's clock."""
    for _ in range(round(seconds * 50)):
        stream.push_frame(frame())
        await clock.advance(0.02)


async def test_a_stream_that_owes_a_final_and_goes_quiet_is_replaced() -> None:
    # A socket that stopped answering without closing: before, every turn after it was
    # unheard for the rest of the call.
    clock, opener, heard = VirtualClock(), Opener(DirectStream), []
    stream = RecoveringRecognizeStream(opener, clock)
    stream.deliver_to(lambda event: heard.append(event.alternatives[0].text))
    stream.flush()  # an utterance ended; its final never comes
    await frames_for(stream, clock, QUIET_LIMIT - 1.5)
    assert len(opener.streams) == 1  # slow is not dead
    await frames_for(stream, clock, 3.5)  # seen within a second of the limit
    await settle()
    assert len(opener.streams) == 2 and opener.streams[0].closed
    assert heard == [""]  # its owed final answered empty
    stream.push_frame(frame())
    opener.streams[1].say("heat pumps")
    assert heard == ["", "heat pumps"]


async def test_a_stream_that_owes_a_final_but_still_speaks_or_owes_nothing_is_kept() -> None:
    clock, opener, heard = VirtualClock(), Opener(DirectStream), []
    stream = RecoveringRecognizeStream(opener, clock)
    stream.deliver_to(lambda event: heard.append(event.alternatives[0].text))
    await frames_for(stream, clock, 3 * QUIET_LIMIT)  # a caller silent for a minute
    first = opener.streams[0]
    stream.flush()
    for _ in range(4):  # owing, behind on a loaded machine, but its interims come
        await frames_for(stream, clock, QUIET_LIMIT / 2)
        first.say("still")
    assert len(opener.streams) == 1 and heard == ["still"] * 4


# -- the pipeline session ------------------------------------------------------------------

RATE = 16000
FRAME = frame_bytes(RATE)
ROOM = "call-1"
WORDS = "please research solar panels"


class StreamingWords:
    """`UtteranceRecognizer` behind streams of its own, each recorded, so the test can end
    one under the call (as a provider's broken connection does)."""

    capabilities = stt.STTCapabilities(streaming=True, interim_results=False, manual_flush=True)

    def __init__(self) -> None:
        self.inner = UtteranceRecognizer(WORDS)
        self.streams: list[UtteranceStream] = []

    def stream(self) -> UtteranceStream:
        self.streams.append(UtteranceStream(self.inner))
        return self.streams[-1]

    def on(self, event: str, handler: Any) -> None:
        pass

    def off(self, event: str, handler: Any) -> None:
        pass


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    tts = PiperTTS(sample_rate=22050)
    tts.prewarm()
    return {"tts": tts, "vad": load_vad("silero")}


@pytest.mark.slow
async def test_the_caller_is_heard_again_after_the_recognizer_stream_failed(
    models: dict[str, Any],
) -> None:
    clock = VirtualClock()
    speech = spoken(WORDS, rate=RATE)
    speech += bytes(-len(speech) % FRAME)
    async with Hub(clock=clock) as hub:
        await hub.create_room(ROOM, orchestration=None)
        agent = Agent(id="desk", llm=ScriptedLLM([], fallback="Go on."))
        transport = MemoryTransport(RATE, ack="immediate")
        recognizer = StreamingWords()
        session = pipeline_session(
            hub, ROOM, agent, transport, stt=recognizer, vad=models["vad"], tts=models["tts"],
            reply_gate=lambda: False,  # the caller's turns only: no reply to wait for
        )  # fmt: skip
        transport.session = session
        await session.start()
        try:
            await recognizer.streams[0].aclose()  # the provider's stream is over mid-call
            audio = bytes(25 * FRAME) + speech + bytes(50 * FRAME)
            for start in range(0, len(audio), FRAME):
                await session.push_audio(audio[start : start + FRAME])
                await settle()
                await clock.advance(0.02)
            await transport.wait_for(
                lambda: [e.state for e in transport.events_of(UserState)][-1:] == ["listening"]
            )
            for _ in range(30):
                await clock.advance(0.1)
                await settle()
            history = await hub.history(ROOM)
            turns = [e.text for e in history if e.kind is EventKind.TRANSCRIPT and e.role == "user"]
            assert turns == [WORDS]
            assert len(recognizer.streams) == 2
        finally:
            await session.aclose()
