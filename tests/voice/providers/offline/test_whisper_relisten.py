"""Whisper listens to audio a second time, slowed, when its first hearing asked the research
desk for nothing; the second hearing is kept only when it is a request naming one of the
desk's topics. Committed speech (eSpeak NG and Piper, tests/data), through the phone path
and wideband; each test checks the desk's decision on what was heard (a request or not, the
topic it names), on utterances heard the same way with AVX2 and AVX-512 arithmetic."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.agents.scripted import ScriptedLLM, example_requests, rule_vocabulary
from voicehub.voice.providers.offline.whisper_engine import (
    WhisperRecognizer,
    WhisperTranscript,
    sentences_prompt,
    shared_recognizer,
    vocabulary_prompt,
)
from voicehub.voice.providers.offline.whisper_relisten import SLOWER, Relisten, names_topic

CHANNELS = Path(__file__).resolve().parents[4] / "channels"


@cache
def research_front() -> ScriptedLLM:
    with (CHANNELS / "research.toml").open("rb") as file:
        return ScriptedLLM(tomllib.load(file)["agents"][0]["scripted"]["rules"])


@cache
def research_relisten() -> Relisten:
    with (CHANNELS / "knowledge" / "research.toml").open("rb") as file:
        topics = tuple(entry["topic"] for entry in tomllib.load(file)["entries"])
    front = research_front()
    return Relisten(
        is_request=front.calls_tool,
        topics=topics,
        asks_about=front.tool_arguments,
        prompt=sentences_prompt(example_requests(front.rules, topics)),
    )


@cache
def research_prompt() -> str:
    """The research desk's vocabulary, as its calls prompt Whisper with."""
    topics = list(research_relisten().topics)
    return vocabulary_prompt(topics + rule_vocabulary(research_front().rules, tools_only=True))


def speech(text: str, voice: str) -> bytes:
    """`text` said by `voice` at 16 kHz (a committed fixture)."""
    return spoken(text, voice)


def phone_speech(text: str, voice: str) -> bytes:
    """`text` said by `voice` as a phone line carries it (8 kHz, 300-3400 Hz, mu-law)."""
    return spoken(text, voice, rate=8000, form="phone")


@pytest.fixture
def decodings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """The rate each decoding of the shared recognizer read its audio at, and its prompt."""
    recognizer = shared_recognizer()
    done: list[tuple[int, str]] = []
    decode: Callable[..., WhisperTranscript] = recognizer._decode

    def counting(
        pcm16: bytes, sample_rate: int, prompt: str, correction: object = None
    ) -> WhisperTranscript:
        done.append((sample_rate, prompt))
        return decode(pcm16, sample_rate, prompt, correction)

    monkeypatch.setattr(recognizer, "_decode", counting)
    return done


def rates(decodings: list[tuple[int, str]]) -> list[int]:
    """The rate each decoding read its audio at."""
    return [rate for rate, _ in decodings]


def hear(audio: bytes, rate: int, relisten: Relisten | None = None) -> WhisperTranscript:
    recognizer: WhisperRecognizer = shared_recognizer()
    return recognizer.recognize(audio, rate, prompt=research_prompt(), relisten=relisten)


@pytest.mark.slow
def test_a_request_lost_on_the_phone_line_is_caught_by_the_slowed_listening(
    decodings: list[tuple[int, str]],
) -> None:
    audio = phone_speech("please find out about wind turbines", "espeak")
    once = hear(audio, 8000)
    assert not research_front().calls_tool(once.text), once.text  # what the relisten is for
    twice = hear(audio, 8000, research_relisten())
    assert rates(decodings) == [8000, 8000, round(8000 * SLOWER)]
    assert research_front().calls_tool(twice.text)
    assert names_topic(twice.text, ["wind turbines"]), twice.text
    assert 0.0 <= twice.start_time < twice.end_time <= len(audio) / 2 / 8000 + 0.1


@pytest.mark.slow
def test_the_second_listening_is_primed_with_the_desks_requests_as_sentences(
    decodings: list[tuple[int, str]],
) -> None:
    audio = phone_speech("please find out about wind turbines", "espeak")
    relisten = research_relisten()
    heard = hear(audio, 8000, relisten)
    assert decodings == [(8000, research_prompt()), (round(8000 * SLOWER), relisten.prompt)]
    assert relisten.prompt.startswith("Research solar panels. Look into wind turbines.")
    assert research_front().calls_tool(heard.text)
    assert names_topic(heard.text, ["wind turbines"]), heard.text


@pytest.mark.slow
def test_an_unrelated_utterance_listened_to_again_is_still_no_request(
    decodings: list[tuple[int, str]],
) -> None:
    # No request the first time, so it is heard again; the second hearing asks for nothing
    # either, and the first is kept.
    audio = phone_speech("my neighbour has a new dog", "espeak")
    heard = hear(audio, 8000, research_relisten())
    assert rates(decodings) == [8000, round(8000 * SLOWER)]
    assert not research_front().calls_tool(heard.text), heard.text


def test_a_request_heard_the_first_time_is_decoded_once(decodings: list[tuple[int, str]]) -> None:
    audio = phone_speech("could you dig into heat pumps for me", "piper")
    heard = hear(audio, 8000, research_relisten())
    assert rates(decodings) == [8000]
    assert research_front().calls_tool(heard.text)


@pytest.mark.slow
def test_wideband_audio_is_listened_to_again_the_same_way(decodings: list[tuple[int, str]]) -> None:
    audio = speech("my neighbour has a new dog", "piper")
    heard = hear(audio, 16000, research_relisten())
    assert rates(decodings) == [16000, round(16000 * SLOWER)]
    assert not research_front().calls_tool(heard.text)
    assert hear(audio, 16000) == heard  # the first hearing kept


@pytest.mark.slow
def test_a_wideband_request_misheard_is_caught_by_the_slowed_listening(
    decodings: list[tuple[int, str]],
) -> None:
    audio = speech("what is a smart meter", "espeak")
    once = hear(audio, 16000)
    assert not research_front().calls_tool(once.text), once.text
    twice = hear(audio, 16000, research_relisten())
    assert rates(decodings) == [16000, 16000, round(16000 * SLOWER)]
    assert research_front().calls_tool(twice.text) and "meter" in twice.text.lower()


def test_a_topic_is_named_by_all_its_words_singular_or_plural() -> None:
    topics = ["solar panels", "batteries", "heat pumps"]
    assert names_topic("You look into a solar panel, for me.", topics)
    assert names_topic("research the battery", topics)
    assert names_topic("What is a HEAT PUMP?", topics)
    assert not names_topic("go film their panels", topics)  # "solar" missing
    assert not names_topic("what is it, range tomorrow", topics)
    assert not names_topic("", topics)
    assert not names_topic("solar panels", [])


def test_a_second_hearing_is_believed_only_as_a_request_naming_a_topic() -> None:
    relisten = research_relisten()
    assert relisten.believes("Please find out about, wind turbine.")
    assert not relisten.believes("what, is it ready tomorrow?")  # a request, no topic
    assert not relisten.believes("nevermind, not today")  # a request, no topic
    assert not relisten.believes("I like solar panels")  # a topic, no request
    assert not relisten.believes("")


def test_a_request_about_none_of_the_topics_is_listened_to_again() -> None:
    relisten = research_relisten()
    assert relisten.listens_again("how about the weekend")  # no request
    assert relisten.listens_again("dig into, high, low power, for me")  # no topic named
    assert relisten.listens_again("So, what are we going to survive?")
    assert not relisten.listens_again("dig into hydro power for me")
    assert not relisten.listens_again("what is a heat pump")
    assert not relisten.listens_again("any news")  # a request without a topic to mishear
    assert not relisten.listens_again("never mind")
    without = Relisten(is_request=research_front().calls_tool, topics=relisten.topics)
    assert not without.listens_again("dig into, high, low power, for me")
    assert without.listens_again("how about the weekend")
