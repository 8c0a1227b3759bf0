"""DeepgramTTS through the real deepgram-sdk client against the fake Deepgram (Piper audio)."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from livekit.agents import tts

from voicehub.voice.audio import lin2ulaw, ulaw2lin
from voicehub.voice.providers.deepgram import DeepgramEndpoint, DeepgramTTS, RetryPolicy
from voicehub_dev.fakes.deepgram import FakeDeepgram, piper_speech


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


async def test_prewarm_opens_the_socket_the_first_reply_then_takes(fake: FakeDeepgram) -> None:
    plugin = voice(fake)
    plugin.prewarm()
    plugin.prewarm()  # once is enough: one socket opens
    await fake.wait_for(lambda: len(fake.handshakes) == 1)
    assert fake.handshakes == [("/v1/speak", 200)] and not fake.speaks[0].messages
    stream = plugin.stream()
    stream.push_text("Hello there.")
    stream.end_input()
    assert await audio_of(stream) == piper_speech("Hello there.", 24000)
    assert len(fake.speaks) == 1  # the reply spoke on the socket opened ahead
    await plugin.aclose()


async def test_a_reply_right_after_prewarm_waits_for_that_socket(fake: FakeDeepgram) -> None:
    plugin = voice(fake)
    plugin.prewarm()  # still connecting when the reply asks for a socket
    pcm = b"".join([chunk async for chunk in plugin.speak_pcm(_texts("Right away."))])
    assert pcm == piper_speech("Right away.", 24000)
    assert len(fake.handshakes) == 1
    await plugin.aclose()


async def test_a_prewarm_that_fails_leaves_the_connect_and_its_error_to_the_reply(
    fake: FakeDeepgram,
) -> None:
    plugin = voice(fake, key="wrong")
    errors: list[tts.TTSError] = []
    plugin.on("error", errors.append)
    plugin.prewarm()
    await fake.wait_for(lambda: len(fake.handshakes) == 1)
    await plugin.aclose()  # nothing left open, nothing reported by the prewarm
    assert errors == []
    stream = plugin.stream()
    stream.push_text("Hello.")
    stream.end_input()
    with pytest.raises(Exception, match="refused the API key"):
        await audio_of(stream)
    assert [s for _, s in fake.handshakes] == [401, 401]


async def test_closing_while_the_prewarmed_socket_opens_leaves_none_open(
    fake: FakeDeepgram,
) -> None:
    plugin = voice(fake)
    plugin.prewarm()
    await plugin.aclose()
    await fake.wait_for(lambda: all(speak.closed for speak in fake.speaks))


# -- the direct path (`speak_pcm`, what voicehub's engine plays) against livekit's stream ---


async def _texts(*texts: str) -> AsyncIterator[str]:
    for text in texts:
        yield text


def _rendered(sentences: list[str], encoding: str, rate: int) -> bytes:
    """What the fake says for each flushed sentence, as the plugin decodes it."""
    audio = [piper_speech(sentence.strip(), rate) for sentence in sentences]
    if encoding == "mulaw":
        audio = [ulaw2lin(lin2ulaw(pcm)) for pcm in audio]
    return b"".join(audio)


@pytest.mark.parametrize(
    ("encoding", "rate"), [("linear16", 24000), ("linear16", 16000), ("mulaw", 8000)]
)
async def test_speak_pcm_says_each_text_as_it_comes_and_plays_all_of_it(
    fake: FakeDeepgram, encoding: str, rate: int
) -> None:
    """The engine's texts (sentences as the model writes them) each pushed and flushed."""
    texts = ("Hello there. How", " are you", " today? Fine.", "   ", "Bye!")
    plugin = voice(fake, encoding=encoding, sample_rate=rate)
    direct = b"".join([pcm async for pcm in plugin.speak_pcm(_texts(*texts))])
    said = ["Hello there. ", "How", " are you", " today? ", "Fine.", "Bye!"]
    assert direct == _rendered(said, encoding, rate)  # byte for byte, every sentence
    [socket] = fake.speaks
    assert socket.messages == [
        message for text in said for message in ({"type": "Speak", "text": text}, {"type": "Flush"})
    ]
    await plugin.aclose()


@pytest.mark.parametrize(("encoding", "rate"), [("linear16", 24000), ("mulaw", 8000)])
async def test_speak_pcm_says_and_plays_what_the_livekit_stream_does(
    fake: FakeDeepgram, encoding: str, rate: int
) -> None:
    text = "Hello there. How are you today?"
    plugin = voice(fake, encoding=encoding, sample_rate=rate)
    direct = b"".join([pcm async for pcm in plugin.speak_pcm(_texts(text))])
    stream = plugin.stream()
    stream.push_text(text)
    stream.end_input()
    assert direct == await audio_of(stream)  # byte for byte
    [socket] = fake.speaks  # both on the one socket, one reply after the other
    half = len(socket.messages) // 2
    assert socket.messages[:half] == socket.messages[half:]
    await plugin.aclose()


async def test_speak_pcm_cut_short_clears_the_socket_for_the_next_reply(
    fake: FakeDeepgram,
) -> None:
    plugin = voice(fake)
    spoken = plugin.speak_pcm(_texts("This is a long answer that the caller will cut. It goes on."))
    assert await anext(spoken)  # the first audio arrived: now the caller speaks
    await spoken.aclose()
    await fake.wait_for(lambda: {"type": "Clear"} in fake.speaks[0].messages)
    after = b"".join([pcm async for pcm in plugin.speak_pcm(_texts("Yes?"))])
    assert after == piper_speech("Yes?", 24000)  # nothing of the cut reply
    assert len(fake.speaks) == 1
    await plugin.aclose()


async def test_speak_pcm_reports_a_refused_key_as_the_stream_does(fake: FakeDeepgram) -> None:
    plugin = voice(fake, key="wrong")
    errors: list[tts.TTSError] = []
    plugin.on("error", errors.append)
    with pytest.raises(Exception, match="refused the API key"):
        _ = [pcm async for pcm in plugin.speak_pcm(_texts("Hello."))]
    stream = plugin.stream()
    stream.push_text("Hello.")
    stream.end_input()
    with pytest.raises(Exception, match="refused the API key"):
        await audio_of(stream)
    assert [e.recoverable for e in errors] == [False, False]
    assert str(errors[0].error) == str(errors[1].error)


async def test_the_engine_plays_every_sentence_of_a_deepgram_reply(fake: FakeDeepgram) -> None:
    """`synthesized_pcm` takes Deepgram's PCM directly, resampled to the call's rate when
    it differs; through livekit's stream only the first flushed text was heard."""
    from voicehub.voice.audio import Resampler, int16_to_pcm16
    from voicehub.voice.engine.tts_audio import PcmSpeaker, synthesized_pcm

    plugin = voice(fake, sample_rate=24000)
    speaker: PcmSpeaker = plugin  # mypy holds it to the protocol
    assert speaker.speak_pcm is not None
    firsts: list[bool] = []
    sentences = ("The analysts are on it. ", "I will tell you when they are done.")
    same = b"".join([pcm async for pcm in synthesized_pcm(plugin, _texts(*sentences), 24000)])
    assert same == _rendered(list(sentences), "linear16", 24000)
    resampled = b"".join(
        [
            pcm
            async for pcm in synthesized_pcm(
                plugin, _texts(*sentences), 16000, first_audio=lambda: firsts.append(True)
            )
        ]
    )
    resampler = Resampler(24000, 16000)
    expected = int16_to_pcm16(resampler.push(same)) + int16_to_pcm16(resampler.flush())
    assert resampled == expected and firsts == [True]
    await plugin.aclose()


async def test_a_burst_of_audio_lets_the_event_loop_run_between_messages() -> None:
    """A whole reply already queued is not played in one step of the loop: other calls'
    frames run between its messages."""
    import asyncio

    from voicehub.voice.providers.deepgram.speak_exchange import spoken_audio

    class Burst:
        def __init__(self) -> None:
            self.messages: asyncio.Queue[object] = asyncio.Queue()

        async def speak(self, text: str) -> None:
            for number in range(5):  # the server's whole answer at once
                self.messages.put_nowait(bytes([number]) * 640)

        async def flush(self) -> None:
            self.messages.put_nowait(type("Flushed", (), {"type": "Flushed"})())

    steps = 0

    async def other_calls() -> None:
        nonlocal steps
        while True:
            steps += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_calls())
    seen: list[int] = []
    async for _pcm in spoken_audio(Burst(), _texts("Hi."), bytes, whole_samples=True):  # type: ignore[arg-type]
        seen.append(steps)
    ticker.cancel()
    assert len(seen) == 5
    assert all(later > earlier for earlier, later in itertools.pairwise(seen))
