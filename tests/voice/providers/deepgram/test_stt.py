"""DeepgramSTT through the real deepgram-sdk client against the fake Deepgram.

The caller's words are real Piper speech; the fake segments them by energy and answers with
the transcript registered for each utterance (it has no recognizer, see its docstring).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from livekit import rtc
from livekit.agents import stt

from tests.support.speech import spoken
from voicehub.core.clock import VirtualClock
from voicehub.voice.audio import frame_bytes
from voicehub.voice.providers.deepgram import (
    DeepgramEndpoint,
    DeepgramLink,
    DeepgramSTT,
    RetryPolicy,
)
from voicehub_dev.fakes.deepgram import FakeDeepgram

WORDS = "please research solar panels"
Kind = stt.SpeechEventType


@pytest.fixture
async def fake() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram() as server:
        yield server


def endpoint(fake: FakeDeepgram, key: str | None = None) -> DeepgramEndpoint:
    return DeepgramEndpoint(api_key=key or fake.api_key, base_url=fake.url)


def frames(pcm: bytes, rate: int) -> list[rtc.AudioFrame]:
    size = frame_bytes(rate)
    return [
        rtc.AudioFrame(pcm[i : i + size], rate, 1, len(pcm[i : i + size]) // 2)
        for i in range(0, len(pcm), size)
    ]


async def recognize(
    plugin: DeepgramSTT, pcm: bytes, rate: int = 16000, *, silence: float = 1.5
) -> list[stt.SpeechEvent]:
    stream = plugin.stream()
    for frame in frames(pcm + bytes(2 * int(rate * silence)), rate):
        stream.push_frame(frame)
    stream.end_input()
    return [event async for event in stream]


def finals(events: list[stt.SpeechEvent]) -> list[str]:
    """Non-empty finals (end_input flushes, and a Finalize with nothing pending answers an
    empty final, which the plugin passes on: AgentSession waits for one after a flush)."""
    texts = [e.alternatives[0].text for e in events if e.type is Kind.FINAL_TRANSCRIPT]
    return [text for text in texts if text]


def errors_of(plugin: DeepgramSTT) -> list[stt.STTError]:
    seen: list[stt.STTError] = []
    plugin.on("error", seen.append)
    return seen


async def test_interim_final_endpointing_and_utterance_end(fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake), keyterms=("solar", "research"))
    events = await recognize(plugin, spoken(WORDS, rate=16000))

    kinds = [e.type for e in events]
    assert kinds[0] is Kind.START_OF_SPEECH
    interims = [e.alternatives[0].text for e in events if e.type is Kind.INTERIM_TRANSCRIPT]
    assert interims and all(WORDS.startswith(text) for text in interims)
    assert finals(events) == [WORDS]
    assert kinds.index(Kind.FINAL_TRANSCRIPT) < kinds.index(Kind.END_OF_SPEECH)
    assert Kind.RECOGNITION_USAGE in kinds

    [session] = fake.listens
    params = session.params
    assert (params.encoding, params.sample_rate, params.model) == ("linear16", 16000, "nova-3")
    assert params.keyterms == ("solar", "research")
    assert (params.endpointing, params.utterance_end, params.interim_results) == (0.3, 1.0, True)
    sent = [m["type"] for m in session.sent]
    assert "SpeechStarted" in sent and "UtteranceEnd" in sent
    assert [m for m in session.sent if m.get("speech_final")]
    assert session.controls == ["Finalize", "CloseStream"]  # end_input flushes first


async def test_phone_audio_goes_as_mulaw_at_8khz_without_resampling(fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake), encoding="mulaw", sample_rate=8000)
    speech = spoken(WORDS, rate=8000)
    events = await recognize(plugin, speech, 8000, silence=1.0)
    assert finals(events) == [WORDS]
    [session] = fake.listens
    assert (session.params.encoding, session.params.sample_rate) == ("mulaw", 8000)
    samples = (len(speech) + 2 * 8000) // 2
    assert session.audio_bytes == samples  # one byte per 8 kHz sample: G.711, not resampled


async def test_flush_sends_finalize_and_the_turn_comes_back_final(fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake), endpointing_ms=None)
    stream = plugin.stream()
    for frame in frames(spoken(WORDS, rate=16000), 16000):  # no trailing silence
        stream.push_frame(frame)
    stream.flush()
    seen: list[stt.SpeechEvent] = []
    async for event in stream:
        seen.append(event)
        if event.type is Kind.FINAL_TRANSCRIPT:
            break
    assert finals(seen) == [WORDS]
    await fake.wait_for(lambda: "Finalize" in fake.listens[0].controls)
    [final] = [m for m in fake.listens[0].sent if m["type"] == "Results" and m["is_final"]]
    assert final["from_finalize"] is True
    await stream.aclose()


async def test_a_dropped_socket_reconnects_and_the_utterance_is_still_heard(
    fake: FakeDeepgram,
) -> None:
    fake.transcripts.append(WORDS)
    fake.drop_listen_after = 0.8  # seconds of audio, mid-utterance
    plugin = DeepgramSTT(endpoint=endpoint(fake))
    errors = errors_of(plugin)
    speech = spoken(WORDS, rate=16000)
    events = await recognize(plugin, speech)

    assert finals(events) == [WORDS]
    first, second = fake.listens
    assert first.dropped and not any(m.get("is_final") for m in first.sent)
    # the second socket got the whole utterance again: the replay started at the beginning
    assert second.audio_bytes >= len(speech)
    assert [e.recoverable for e in errors] == [True]


async def test_429_and_5xx_are_retried_with_backoff_and_reported(fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    fake.reject.extend([429, 503])
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    plugin = DeepgramSTT(
        endpoint=endpoint(fake),
        link=DeepgramLink(retry=RetryPolicy(initial_delay=0.5), sleep=sleep),
    )
    errors = errors_of(plugin)
    events = await recognize(plugin, spoken(WORDS, rate=16000))
    assert finals(events) == [WORDS]
    assert delays == [0.5, 1.0]
    assert [s for _, s in fake.handshakes] == [429, 503, 200]
    assert ["HTTP 429" in str(e.error) for e in errors] == [True, False]
    assert all(e.recoverable for e in errors)


async def test_a_refused_key_fails_clearly_without_retrying(fake: FakeDeepgram) -> None:
    plugin = DeepgramSTT(endpoint=endpoint(fake, key="wrong"))
    errors = errors_of(plugin)
    with pytest.raises(Exception, match="refused the API key in DEEPGRAM_API_KEY"):
        await recognize(plugin, spoken(WORDS, rate=16000))
    assert [s for _, s in fake.handshakes] == [401]
    assert [e.recoverable for e in errors] == [False]


async def test_falls_back_to_the_offline_recognizer_when_deepgram_stays_down(
    fake: FakeDeepgram,
) -> None:
    from voicehub.voice.providers.offline import PocketSphinxSTT

    fake.reject.extend([503] * 3)

    async def no_wait(seconds: float) -> None:
        pass

    plugin = DeepgramSTT(
        endpoint=endpoint(fake),
        link=DeepgramLink(retry=RetryPolicy(attempts=2), sleep=no_wait, fallback=PocketSphinxSTT()),
    )
    errors = errors_of(plugin)
    events = await recognize(plugin, spoken(WORDS, rate=16000))
    heard = " ".join(finals(events))
    assert "solar" in heard, heard
    assert len(fake.handshakes) == 3 and not fake.listens
    assert "falling back to offline" in str(errors[-1].error)


async def test_keepalive_while_no_audio_flows(fake: FakeDeepgram) -> None:
    clock = VirtualClock()
    plugin = DeepgramSTT(
        endpoint=endpoint(fake), link=DeepgramLink(clock=clock, keepalive_interval=4.0)
    )
    stream = plugin.stream()
    await fake.wait_for(lambda: bool(fake.listens))
    await clock.advance(3.9)
    assert "KeepAlive" not in fake.listens[0].controls
    await clock.advance(0.2)
    await fake.wait_for(lambda: fake.listens[0].controls.count("KeepAlive") == 1)
    await clock.advance(4.0)
    await fake.wait_for(lambda: fake.listens[0].controls.count("KeepAlive") == 2)
    await stream.aclose()


def test_query_uses_keywords_on_older_models() -> None:
    options: dict[str, Any] = DeepgramSTT(model="nova-2", keyterms=("solar",)).query()
    assert options["keywords"] == ["solar"] and "keyterm" not in options


async def test_one_shot_recognize_uses_the_live_socket(fake: FakeDeepgram) -> None:
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake))
    event = await plugin.recognize(frames(spoken(WORDS, rate=16000) + bytes(16000), 16000))
    assert event.type is Kind.FINAL_TRANSCRIPT and event.alternatives[0].text == WORDS
    assert fake.listens[0].controls == ["Finalize", "CloseStream"]


async def test_audio_goes_in_chunks_byte_for_byte_and_a_flush_sends_what_waits(
    fake: FakeDeepgram,
) -> None:
    """100 ms messages (not one per 20 ms frame), the bytes exactly the caller's, and the
    part-chunk waiting at a flush goes before Finalize: chunking adds nothing to a turn."""
    fake.keep_audio = True
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake), endpointing_ms=None)
    stream = plugin.stream()
    speech = spoken(WORDS, rate=16000)
    speech = speech[: len(speech) // 640 * 640 - 640 * 2]  # ends 2 frames into a chunk
    for frame in frames(speech, 16000):
        stream.push_frame(frame)
    stream.flush()
    async for event in stream:
        if event.type is Kind.FINAL_TRANSCRIPT:
            assert event.alternatives[0].text == WORDS
            break
    await fake.wait_for(lambda: "Finalize" in fake.listens[0].controls)
    [session] = fake.listens
    assert session.audio == speech  # every byte, in order
    assert session.audio_messages == -(-len(speech) // 3200)  # 100 ms of 16 kHz PCM16 each
    assert fake.extensions and not any("deflate" in offer for offer in fake.extensions)
    await stream.aclose()


async def test_mulaw_chunks_are_the_g711_of_the_callers_audio(fake: FakeDeepgram) -> None:
    from voicehub.voice.audio import lin2ulaw

    fake.keep_audio = True
    fake.transcripts.append(WORDS)
    plugin = DeepgramSTT(endpoint=endpoint(fake), encoding="mulaw", sample_rate=8000)
    speech = spoken(WORDS, rate=8000)
    events = await recognize(plugin, speech, 8000, silence=1.0)
    assert finals(events) == [WORDS]
    [session] = fake.listens
    assert session.audio == lin2ulaw(speech + bytes(2 * 8000))


async def test_direct_events_hear_the_same_as_the_iterator(fake: FakeDeepgram) -> None:
    """DirectEvents: after `deliver_to`, the same events in the same order go to the sink
    (none to the iterator), and usage still becomes livekit metrics."""
    from voicehub.voice.engine.direct_events import DirectEvents

    fake.transcripts.extend([WORDS, WORDS])
    speech = spoken(WORDS, rate=16000) + bytes(2 * int(16000 * 1.5))

    iterated = await recognize(DeepgramSTT(endpoint=endpoint(fake)), spoken(WORDS, rate=16000))

    plugin = DeepgramSTT(endpoint=endpoint(fake))
    metrics: list[Any] = []
    plugin.on("metrics_collected", metrics.append)
    stream = plugin.stream()
    assert isinstance(stream, DirectEvents)
    delivered: list[stt.SpeechEvent] = []
    stream.deliver_to(delivered.append)
    for frame in frames(speech, 16000):
        stream.push_frame(frame)
    stream.end_input()
    assert [event async for event in stream] == []  # all went to the sink

    def shape(events: list[stt.SpeechEvent]) -> list[tuple[Any, str]]:
        return [(e.type, e.alternatives[0].text if e.alternatives else "") for e in events]

    assert shape(delivered) == shape(iterated)
    assert finals(delivered) == [WORDS]
    assert [m.audio_duration for m in metrics if m.audio_duration] == [
        pytest.approx(len(speech) / 32000)
    ]


async def test_unknown_and_malformed_messages_are_skipped(
    fake: FakeDeepgram, caplog: pytest.LogCaptureFixture
) -> None:
    """Results are read as Deepgram's JSON by field name: a type this plugin does not know
    (Deepgram adds some), a message that is not an object, and one that is not JSON at all
    are passed over (the last with a warning naming it) and the utterance is still heard."""
    fake.transcripts.append(WORDS)
    fake.listen_preamble = [
        '{"type": "Metadata", "request_id": "r1", "duration": 0.0}',
        '{"type": "SomethingNew", "channel": 3}',
        "[1, 2, 3]",
        "this is not json",
    ]
    events = await recognize(DeepgramSTT(endpoint=endpoint(fake)), spoken(WORDS, rate=16000))
    assert finals(events) == [WORDS]
    assert [e.type for e in events].count(Kind.START_OF_SPEECH) == 1
    assert "not JSON: 'this is not json'" in caplog.text


def test_send_ms_is_held_to_deepgrams_range() -> None:
    with pytest.raises(ValueError, match="20 to 250"):
        DeepgramSTT(link=DeepgramLink(send_ms=500))
