"""DeepgramTTS through the real deepgram-sdk client against the fake Deepgram (Piper audio)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from livekit.agents import tts

from tests.fakes.deepgram import FakeDeepgram, piper_speech
from voicehub.voice.audio import lin2ulaw, ulaw2lin
from voicehub.voice.providers.deepgram import DeepgramEndpoint, DeepgramTTS, RetryPolicy


@pytest.fixture
async def fake() -> AsyncIterator[FakeDeepgram]:
    async with FakeDeepgram() as server:
        yield server


def voice(fake: FakeDeepgram, key: str | None = None, **options: object) -> DeepgramTTS:
    endpoint = DeepgramEndpoint(api_key=key or fake.api_key, base_url=fake.url)
    return DeepgramTTS(endpoint=endpoint, **options)  # type: ignore[arg-type]


async def audio_of(stream: tts.ChunkedStream | tts.SynthesizeStream) -> bytes:
    return b"".join([bytes(event.frame.data) async for event in stream])


async def test_rest_one_shot_returns_the_voice_audio(fake: FakeDeepgram) -> None:
    plugin = voice(fake)
    audio = await audio_of(plugin.synthesize("Your report is ready."))
    assert audio == piper_speech("Your report is ready.", 24000)
    [request] = fake.rest_requests
    assert request["path"] == "/v1/speak" and request["text"] == "Your report is ready."
    query = {k: v[0] for k, v in request["query"].items()}
    assert query == {
        "model": "aura-2-thalia-en",
        "encoding": "linear16",
        "sample_rate": "24000",
        "container": "none",
    }


async def test_phone_output_is_mulaw_at_8khz(fake: FakeDeepgram) -> None:
    plugin = voice(fake, encoding="mulaw", sample_rate=8000)
    audio = await audio_of(plugin.synthesize("Hello caller."))
    assert audio == ulaw2lin(lin2ulaw(piper_speech("Hello caller.", 8000)))
    assert fake.rest_requests[0]["query"]["encoding"] == ["mulaw"]


async def test_streamed_reply_flushes_at_sentence_ends_and_reuses_the_socket(
    fake: FakeDeepgram,
) -> None:
    plugin = voice(fake)
    stream = plugin.stream()
    for token in ("Hello there. How", " are you", " today?"):
        stream.push_text(token)
    stream.end_input()
    audio = await audio_of(stream)
    first, second = "Hello there. ", "How are you today?"
    assert audio == piper_speech(first.strip(), 24000) + piper_speech(second, 24000)
    [socket] = fake.speaks
    assert socket.messages == [
        {"type": "Speak", "text": first},
        {"type": "Flush"},
        {"type": "Speak", "text": second},
        {"type": "Flush"},
    ]
    assert (socket.query["encoding"], socket.query["sample_rate"]) == (["linear16"], ["24000"])

    again = plugin.stream()
    again.push_text("Goodbye.")
    again.end_input()
    assert await audio_of(again) == piper_speech("Goodbye.", 24000)
    assert len(fake.speaks) == 1  # the same socket served both replies
    await plugin.aclose()


async def test_barge_in_clears_the_socket_before_the_next_reply(fake: FakeDeepgram) -> None:
    plugin = voice(fake)
    stream = plugin.stream()
    stream.push_text("This is a long answer that the caller will cut short. ")
    stream.push_text("It has a second sentence too.")
    stream.end_input()
    async for _ in stream:
        break  # the first audio arrived: now the caller speaks
    await stream.aclose()
    await fake.wait_for(lambda: {"type": "Clear"} in fake.speaks[0].messages)

    after = plugin.stream()
    after.push_text("Yes?")
    after.end_input()
    assert await audio_of(after) == piper_speech("Yes?", 24000)  # nothing of the cut reply
    assert len(fake.speaks) == 1
    await plugin.aclose()


async def test_rest_429_and_503_are_retried_with_backoff(fake: FakeDeepgram) -> None:
    fake.reject.extend([429, 503])
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    plugin = voice(fake, sleep=sleep, retry=RetryPolicy(initial_delay=0.1))
    errors: list[tts.TTSError] = []
    plugin.on("error", errors.append)
    audio = await audio_of(plugin.synthesize("Done."))
    assert audio == piper_speech("Done.", 24000)
    assert delays == [0.1, 0.2]
    assert [r["status"] for r in fake.rest_requests] == [429, 503, 200]
    assert [e.recoverable for e in errors] == [True, True]


async def test_a_refused_key_is_a_clear_error(fake: FakeDeepgram) -> None:
    plugin = voice(fake, key="wrong")
    with pytest.raises(Exception, match="refused the API key in DEEPGRAM_API_KEY"):
        await audio_of(plugin.synthesize("Hello."))
    stream = plugin.stream()
    stream.push_text("Hello.")
    stream.end_input()
    with pytest.raises(Exception, match="refused the API key"):
        await audio_of(stream)
    assert [s for _, s in fake.handshakes] == [401]
