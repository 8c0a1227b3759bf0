"""Moonshine Base on recorded fixtures (tests/data/moonshine, made once by its script):
what the desk decides on its words, drafts verified instead of decoded again, long turns
decoded in pieces, and the stream's finals. Decisions, not scores: a request is one when
the research desk's scripted agent calls the tool it should."""

from __future__ import annotations

import asyncio
import threading
import tomllib
import wave
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voicehub.voice.providers.offline.moonshine_model import moonshine_unavailable

pytestmark = pytest.mark.skipif(
    moonshine_unavailable() is not None, reason=moonshine_unavailable() or ""
)

FIXTURES = Path(__file__).resolve().parents[3] / "data" / "moonshine"
CHANNELS = Path(__file__).resolve().parents[3].parent / "channels"
RATE = 16000


@cache
def fixture(name: str) -> bytes:
    with wave.open(str(FIXTURES / name), "rb") as file:
        assert (file.getframerate(), file.getnchannels(), file.getsampwidth()) == (RATE, 1, 2)
        return file.readframes(file.getnframes())


@cache
def recognizer() -> Any:
    from voicehub.voice.providers.offline.moonshine_stt import shared_moonshine

    shared = shared_moonshine()
    shared.prewarm()  # converts once into the cache (about 20 s the first time)
    return shared


def research_tool(words: str) -> tuple[str, str] | None:
    """The tool the research desk's scripted front agent calls for `words`, and its
    arguments (None: no tool)."""
    from voicehub.agents.llm import ChatMessage, ToolCallChunk, ToolSpec
    from voicehub.agents.scripted import ScriptedLLM

    with (CHANNELS / "research.toml").open("rb") as file:
        front = tomllib.load(file)["agents"][0]["scripted"]
    llm = ScriptedLLM(front["rules"], fallback=front.get("fallback", ""))
    specs = [ToolSpec(name=n) for n in ("delegate_workers", "check_tasks", "search_knowledge")]
    chunks = llm.respond([ChatMessage(role="user", content=words)], specs)
    calls = [c.call for c in chunks if isinstance(c, ToolCallChunk)]
    return (calls[0].name, calls[0].arguments.lower()) if calls else None


def samples(pcm16: bytes) -> np.ndarray:
    return np.frombuffer(pcm16, np.int16).astype(np.float32) / 32768.0


def test_a_recorded_request_is_one_the_desk_acts_on() -> None:
    heard = recognizer().recognize(fixture("request.wav"), RATE)
    tool = research_tool(heard.text)
    assert tool is not None and tool[0] == "delegate_workers" and "heat pump" in tool[1]
    assert heard.tokens and 0.0 < heard.confidence <= 1.0


def test_phone_rate_audio_is_resampled_and_heard_alike() -> None:
    from voicehub.voice.audio import resample_pcm16

    narrow = resample_pcm16(fixture("request.wav"), RATE, 8000)
    tool = research_tool(recognizer().recognize(narrow, 8000).text)
    assert tool is not None and tool[0] == "delegate_workers"


def test_silence_and_tiny_buffers_give_no_words() -> None:
    assert recognizer().recognize(bytes(2 * RATE), RATE).text == ""
    assert recognizer().recognize(bytes(200), RATE).text == ""


def test_a_draft_is_verified_in_one_pass_and_changes_nothing() -> None:
    audio = samples(fixture("paused_request.wav"))
    whole = recognizer().decode(audio)
    assert whole.written == len(whole.tokens) and not whole.stopped
    # The draft of the same audio is all kept: the decoder writes nothing itself.
    assert recognizer().decode(audio, whole.tokens).written == 0
    # A draft of the utterance's first part (decoded at the pause): only the rest is written.
    first = recognizer().decode(audio[: pause_in(fixture("paused_request.wav")) // 2])
    verified = recognizer().decode(audio, first.tokens)
    assert verified.tokens == whole.tokens
    assert verified.written < len(whole.tokens)
    # A wrong draft is dropped where it parts from what the decoder would write.
    wrong = recognizer().decode(audio, [*whole.tokens[:3], 5, 6, 7])
    assert wrong.tokens == whole.tokens


def test_a_long_turn_is_decoded_in_pieces_and_nothing_is_lost() -> None:
    from voicehub.voice.providers.offline.moonshine_guards import pieces

    audio = fixture("long_turn.wav")
    assert len(pieces(samples(audio), RATE)) == 2
    heard = recognizer().recognize(audio, RATE)
    said = heard.text.lower()
    assert "boiler" in said and "solar panels" in said  # words of both pieces
    assert heard.tokens == ()  # pieces' tokens are no draft of the whole


def test_a_decoding_a_guard_stopped_is_doubted_and_heard_again() -> None:
    from voicehub.voice.providers.offline.moonshine_engine import Decoding, MoonshineRecognizer
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion

    class Looped:
        """A model whose decoder went round a loop (cut to its first saying)."""

        def decode(self, samples: np.ndarray, draft: Sequence[int]) -> Decoding:
            return Decoding((11, 12), -0.01, 2, stopped=True)

        def text(self, tokens: Sequence[int]) -> str:
            return "number"

    looped = MoonshineRecognizer(model=Looped())  # type: ignore[arg-type]
    heard = looped.recognize(fixture("request.wav"), RATE)
    assert heard.text == "number" and heard.confidence <= 0.2
    whisper = Whisper("could you research heat pumps")
    stt = MoonshineSTT(recognizer=looped, second_opinion=SecondOpinion(whisper))  # type: ignore[arg-type]
    assert stt.hear(fixture("request.wav"), RATE).text == "could you research heat pumps"
    assert whisper.heard == 1


def frames(pcm16: bytes, rate: int = RATE) -> Iterator[Any]:
    from livekit import rtc

    step = 2 * rate // 50
    for start in range(0, len(pcm16), step):
        chunk = pcm16[start : start + step]
        yield rtc.AudioFrame(chunk, rate, 1, len(chunk) // 2)


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


def pause_in(pcm16: bytes) -> int:
    """The byte offset where the fixture's pause starts (its silences are digital zeros)."""
    quiet = samples(pcm16) == 0
    frame = RATE // 50
    for at in range(RATE // 2, quiet.size - RATE // 2, frame):
        if quiet[at : at + RATE // 2].all():
            return 2 * at
    raise AssertionError("no pause in the fixture")


class Spy:
    """The shared recognizer, recording each decoding's draft and thread."""

    def __init__(self) -> None:
        self.inner = recognizer()
        self.queue = self.inner.queue
        self.drafts: list[tuple[int, ...]] = []
        self.threads: list[str] = []

    def prewarm(self) -> None:
        self.inner.prewarm()

    def recognize(self, pcm16: bytes, sample_rate: int, *, draft: Sequence[int] = ()) -> Any:
        self.drafts.append(tuple(draft))
        self.threads.append(threading.current_thread().name)
        return self.inner.recognize(pcm16, sample_rate, draft=draft)


async def test_the_final_verifies_the_draft_decoded_at_the_pause() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT

    spy = Spy()
    stream = MoonshineSTT(recognizer=spy).stream()  # type: ignore[arg-type]
    audio = fixture("paused_request.wav")
    pause_ends = pause_in(audio) + 2 * RATE // 2  # half a second into the pause
    for frame in frames(audio[:pause_ends]):
        stream.push_frame(frame)
    interim = (await events_until(stream, T.INTERIM_TRANSCRIPT))[-1].alternatives[0].text
    assert "heat pumps" in interim.lower()
    for frame in frames(audio[pause_ends:]):
        stream.push_frame(frame)
    stream.flush()
    final = (await events_until(stream, T.FINAL_TRANSCRIPT))[-1].alternatives[0].text
    tool = research_tool(final)
    assert tool is not None and tool[0] == "delegate_workers" and "heat pump" in tool[1]
    assert spy.drafts[0] == () and spy.drafts[-1]  # the final was given the pause's tokens
    assert all(t != threading.current_thread().name for t in spy.threads)
    await stream.aclose()


class Whisper:
    """A second opinion that hears what it is told to."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.heard = 0

    def prewarm(self) -> None:
        return None

    def hear(self, pcm16: bytes, sample_rate: int, **_: Any) -> Any:
        from voicehub.voice.providers.offline.whisper_engine import WhisperTranscript

        self.heard += 1
        return WhisperTranscript(self.text, 0.9, 0.0, 1.0)


def relisten() -> Any:
    from voicehub.voice.providers.offline.whisper_relisten import Relisten

    return Relisten(
        is_request=lambda words: research_tool(words) is not None,
        topics=("heat pumps", "solar panels"),
    )


def test_a_request_moonshine_is_sure_of_is_not_heard_again() -> None:
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion

    whisper = Whisper("something else")
    stt = MoonshineSTT(
        recognizer=recognizer(),
        second_opinion=SecondOpinion(whisper, relisten()),  # type: ignore[arg-type]
    )
    heard = stt.hear(fixture("request.wav"), RATE)
    assert whisper.heard == 0 and research_tool(heard.text) is not None


def test_words_that_ask_for_nothing_are_heard_again_and_a_request_about_a_topic_is_kept() -> None:
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion

    whisper = Whisper("could you research solar panels")
    stt = MoonshineSTT(
        recognizer=recognizer(),
        second_opinion=SecondOpinion(whisper, relisten()),  # type: ignore[arg-type]
    )
    # The long turn's first pieces ask for nothing; Moonshine's words are a request about
    # a topic, so they are kept even though Whisper was asked.
    heard = stt.hear(fixture("long_turn.wav")[: 2 * 5 * RATE], RATE)
    assert whisper.heard == 1
    assert heard.text == "could you research solar panels"
    # An interim is never heard again.
    stt.hear(fixture("long_turn.wav")[: 2 * 5 * RATE], RATE, final=False)
    assert whisper.heard == 1


@pytest.mark.slow
def test_the_end_of_a_request_cut_off_by_a_pause_names_its_topic() -> None:
    # `voicehub call --say "could you research" --pause 0.8 --say "heat pumps for me
    # please"`: the pause ends the first utterance, so the second is heard alone. Moonshine
    # hears it "He pumps for me, please." (sure of it); the desk's Whisper, asked since the
    # words ask for nothing, hears "heat pumps", and that hearing is the one the turn joins.
    from tests.support.speech import spoken
    from voicehub.desks.desk import build_desk
    from voicehub.desks.loading import load_desk_file
    from voicehub.desks.offline_stack import speech_to_text_for
    from voicehub.voice.providers.offline.whisper_engine import whisper_unavailable

    if whisper_unavailable() is not None:
        pytest.skip(whisper_unavailable() or "")
    stt = speech_to_text_for(build_desk(load_desk_file(CHANNELS / "research.toml")))
    assert stt.second_opinion is not None  # "auto": Moonshine, Whisper its second opinion
    heard = stt.hear(spoken("heat pumps for me please"), RATE)
    assert "heat pumps" in heard.text.lower(), heard.text
    turn = " ".join([stt.hear(spoken("could you research"), RATE).text, heard.text])
    assert research_tool(turn) == ("delegate_workers", '{"task": "heat pumps"}'), turn


async def test_the_final_is_decoded_before_the_vads_end_of_speech() -> None:
    # The speech gate holds about 0.16 s of silence after the last word as speech: with the
    # window's tail (0.04 s) the decoding that is the final starts about 0.2 s after the
    # caller's last word, before the session's VAD ends their speech (about 0.3 s); the
    # flush then takes it, and decodes nothing more.
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT
    from voicehub_dev.bench.voice_latency import frames_of, last_voiced

    spy = Spy()
    stream = MoonshineSTT(recognizer=spy).stream()  # type: ignore[arg-type]
    audio = fixture("request.wav") + bytes(2 * RATE)
    last_word = last_voiced(frames_of(audio))
    heard_by = 2 * RATE // 50 * (last_word + 1 + round(0.25 / 0.02))  # 0.25 s of silence
    for frame in frames(audio[:heard_by]):
        stream.push_frame(frame)
    interim = (await events_until(stream, T.INTERIM_TRANSCRIPT))[-1].alternatives[0].text
    tool = research_tool(interim)
    assert tool is not None and tool[0] == "delegate_workers" and "heat pump" in tool[1]
    decoded = len(spy.drafts)
    for frame in frames(audio[heard_by : heard_by + 2 * RATE // 10]):
        stream.push_frame(frame)
    stream.flush()
    final = (await events_until(stream, T.FINAL_TRANSCRIPT))[-1].alternatives[0].text
    assert final == interim
    assert len(spy.drafts) == decoded  # the final was the pause's decoding
    await stream.aclose()


class HeldWhisper(Whisper):
    """A second opinion that hears once `release` is set (a second of Whisper, held)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.hearing = threading.Event()
        self.release = threading.Event()

    def hear(self, pcm16: bytes, sample_rate: int, **options: Any) -> Any:
        self.hearing.set()
        assert self.release.wait(60), "never released"
        return super().hear(pcm16, sample_rate, **options)


async def test_a_final_is_not_held_behind_another_calls_second_opinion() -> None:
    # Both calls' decodings share the one Moonshine thread; the first call's final is
    # doubted and heard again by Whisper. The second call's final comes while that
    # hearing still runs (here: held until the end), and the first call's final is
    # Whisper's hearing once it ends.
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline.moonshine_engine import MoonshineRecognizer
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion

    shared = MoonshineRecognizer(files=None)
    shared.prewarm()
    whisper = HeldWhisper("could you research solar panels")
    doubting = SecondOpinion(whisper, below=1.01)  # type: ignore[arg-type]  # every final
    first = MoonshineSTT(recognizer=shared, second_opinion=doubting).stream()
    second = MoonshineSTT(recognizer=shared).stream()
    audio = fixture("request.wav") + bytes(2 * RATE // 2)
    for frame in frames(audio):
        first.push_frame(frame)
    first.flush()
    assert await asyncio.to_thread(whisper.hearing.wait, 60)
    for frame in frames(audio):
        second.push_frame(frame)
    second.flush()
    final = (await events_until(second, T.FINAL_TRANSCRIPT))[-1].alternatives[0].text
    tool = research_tool(final)
    assert tool is not None and "heat pump" in tool[1]
    assert not whisper.release.is_set() and first.finals_owed == 1
    whisper.release.set()
    final = (await events_until(first, T.FINAL_TRANSCRIPT))[-1].alternatives[0].text
    assert final == "could you research solar panels" and whisper.heard == 1
    await first.aclose()
    await second.aclose()


async def test_a_doubted_final_keeps_moonshines_hearing_when_the_second_lane_is_behind() -> None:
    from voicehub.voice.providers.offline.decode_queue import Then, Urgency
    from voicehub.voice.providers.offline.moonshine_engine import MoonshineRecognizer
    from voicehub.voice.providers.offline.moonshine_stt import MoonshineSTT, SecondOpinion

    shared = MoonshineRecognizer(files=None)
    whisper = HeldWhisper("something else")
    stt = MoonshineSTT(
        recognizer=shared,
        second_opinion=SecondOpinion(whisper, below=1.01),  # type: ignore[arg-type]
    )
    ahead = stt.decode(fixture("request.wav"), RATE)
    assert isinstance(ahead, Then) and ahead.urgency == Urgency.SECOND  # the lane is free
    completed = threading.Event()
    for _ in range(2):  # one second opinion running (held), one waiting for the lane
        shared.queue.submit(object(), Urgency.SECOND, ahead.run, lambda *_: completed.set())
    assert await asyncio.to_thread(whisper.hearing.wait, 60)
    assert shared.queue.waiting(Urgency.SECOND) == 1
    kept = stt.decode(fixture("request.wav"), RATE)
    assert not isinstance(kept, Then)
    tool = research_tool(kept.text)
    assert tool is not None and "heat pump" in tool[1]
    assert stt.second_opinions_skipped == 1
    assert stt.decode(fixture("request.wav"), RATE, final=False) == kept  # interims: never
    whisper.release.set()
    assert await asyncio.to_thread(completed.wait, 60)
