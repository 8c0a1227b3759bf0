"""Offline STT: PocketSphinx on speech synthesized by Piper, checked by keywords."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.errors import ProtocolError
from voicehub.voice import audio
from voicehub.voice.providers.offline import transcribe
from voicehub.voice.providers.offline.stt_engine import (
    DecoderPool,
    Final,
    Partial,
    SphinxRecognizer,
    recognize_pcm,
    shared_pool,
)

RESEARCH = "please research solar panels"
WEATHER = "what is the weather tomorrow"


def silence(seconds: float, rate: int = 16000) -> bytes:
    return bytes(2 * int(seconds * rate))


@cache
def speech(text: str, rate: int = 16000) -> bytes:
    return spoken(text, rate=rate)


def words(text: str) -> set[str]:
    return set(text.split())


def test_transcribe_recognizes_keywords() -> None:
    assert {"research", "solar", "panels"} <= words(transcribe(speech(RESEARCH), 16000))


def test_transcribe_resamples_other_rates() -> None:
    assert {"research", "solar"} <= words(transcribe(speech(RESEARCH, 22050), 22050))


def test_transcribe_is_deterministic_across_pooled_decoders() -> None:
    audio = silence(0.3) + speech(WEATHER) + silence(0.3)
    assert transcribe(audio, 16000) == transcribe(audio, 16000)
    assert {"weather", "tomorrow"} <= words(transcribe(audio, 16000))


def test_transcribe_rejects_odd_sized_pcm() -> None:
    with pytest.raises(ProtocolError, match="expected an even number"):
        transcribe(bytes(3), 16000)


class CountingDecoder:
    """Stands in for a PocketSphinx decoder to observe what the gate lets through."""

    def __init__(self) -> None:
        self.fed: list[int] = []
        self.utterances = 0

    def start_utt(self) -> None:
        self.utterances += 1

    def process_raw(self, data: bytes, no_search: bool, full_utt: bool) -> None:
        self.fed.append(len(data))

    def hyp(self) -> Any:
        return None

    def end_utt(self) -> None:
        pass

    def set_cmn(self, cmn: str) -> None:
        pass


def test_gate_keeps_silence_away_from_the_decoder() -> None:
    decoder = CountingDecoder()
    recognizer = SphinxRecognizer(decoder, pre_roll=0.3, hangover=0.5)
    assert recognizer.feed(silence(2.0)) == []
    assert decoder.fed == [] and decoder.utterances == 0

    recognizer.feed(speech(RESEARCH) + silence(2.0))
    assert decoder.utterances == 1
    # 300 ms of pre-roll and 200 ms of speech, held back to check the audio band
    assert decoder.fed[0] == 25 * 640
    assert decoder.fed[1:3] == [640, 640]  # then frame by frame
    fed_seconds = sum(decoder.fed) / 32000
    spoken_seconds = len(speech(RESEARCH)) / 32000
    assert fed_seconds < spoken_seconds + 0.3 + 0.5 + 0.1  # speech, pre-roll, hangover


def test_recognizer_reports_partials_then_a_final_on_trailing_silence() -> None:
    decoder = shared_pool().acquire()
    try:
        recognizer = SphinxRecognizer(decoder, endpoint_silence=1.0)
        events = recognizer.feed(silence(0.5) + speech(RESEARCH) + silence(1.2))
    finally:
        recognizer.close()
        shared_pool().release(decoder)
    partials = [e for e in events if isinstance(e, Partial)]
    finals = [e for e in events if isinstance(e, Final)]
    assert len(partials) >= 3 and events.index(partials[-1]) < events.index(finals[0])
    assert len(finals) == 1
    transcript = finals[0].transcript
    assert {"research", "solar"} <= words(transcript.text)
    assert 0.3 <= transcript.start_time <= 0.7
    assert transcript.end_time == pytest.approx(0.5 + len(speech(RESEARCH)) / 32000, abs=0.3)
    assert 0.0 < transcript.confidence <= 1.0
    assert not recognizer.narrowband


def test_phone_audio_is_detected_and_recognized() -> None:
    # 8 kHz, through G.711 mu-law and back, like a Twilio media stream
    phone = audio.ulaw2lin(audio.lin2ulaw(speech(RESEARCH, 8000)))
    decoder = shared_pool().acquire()
    try:
        recognizer = SphinxRecognizer(decoder, endpoint_silence=None)
        for frame in audio.FrameSplitter(8000).push(silence(0.5, 8000) + phone):
            recognizer.feed(frame, 8000)
        transcript = recognizer.finish()
    finally:
        recognizer.close()
        shared_pool().release(decoder)
    assert recognizer.narrowband
    assert {"research", "solar"} <= words(transcript.text)


# -- the livekit plugin -------------------------------------------------------------------


def frames(pcm: bytes, rate: int = 16000, ms: int = 20) -> Iterator[Any]:
    from livekit import rtc

    size = rate * ms // 1000 * 2
    for start in range(0, len(pcm), size):
        chunk = pcm[start : start + size].ljust(size, b"\x00")
        yield rtc.AudioFrame(chunk, rate, 1, size // 2)


async def collect(stream: Any) -> list[Any]:
    # The timeout only guards against a hang; events come from audio already pushed.
    return await asyncio.wait_for(_drain(stream), timeout=60)


async def _drain(stream: Any) -> list[Any]:
    return [event async for event in stream]


@pytest.mark.slow
async def test_stream_yields_partials_before_the_final() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT

    stt = PocketSphinxSTT()
    assert stt.capabilities.streaming and stt.capabilities.interim_results
    assert stt.capabilities.manual_flush  # so AgentSession flushes on VAD end of speech
    stream = stt.stream()
    for frame in frames(silence(0.4) + speech(RESEARCH) + silence(0.3)):
        stream.push_frame(frame)
    stream.flush()  # what AgentSession does on VAD end of speech
    stream.end_input()
    events = await collect(stream)
    kinds = [e.type for e in events]

    assert kinds[0] == T.START_OF_SPEECH
    first_final = kinds.index(T.FINAL_TRANSCRIPT)
    assert kinds[1:first_final].count(T.INTERIM_TRANSCRIPT) >= 3
    assert set(kinds[1:first_final]) == {T.INTERIM_TRANSCRIPT}
    assert kinds[first_final + 1] == T.END_OF_SPEECH
    final = events[first_final].alternatives[0]
    assert {"research", "solar"} <= words(final.text)
    assert final.language == "en-US"
    assert T.RECOGNITION_USAGE in kinds[first_final:]


async def test_each_flush_ends_one_utterance() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT

    stream = PocketSphinxSTT(endpoint_silence=None).stream()
    for text in (RESEARCH, WEATHER):
        for frame in frames(silence(0.3) + speech(text) + silence(0.3)):
            stream.push_frame(frame)
        stream.flush()
    stream.flush()  # nothing said since: an empty final, which AgentSession waits for
    stream.end_input()
    finals = [e.alternatives[0] for e in await collect(stream) if e.type == T.FINAL_TRANSCRIPT]
    assert {"research", "solar"} <= words(finals[0].text)
    assert {"weather", "tomorrow"} <= words(finals[1].text)
    assert finals[1].start_time > finals[0].end_time
    assert all(f.text == "" for f in finals[2:])


async def test_trailing_silence_ends_the_utterance_without_a_flush() -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT

    stream = PocketSphinxSTT(endpoint_silence=0.8).stream()
    for frame in frames(speech(WEATHER) + silence(1.0)):
        stream.push_frame(frame)

    async def until_end_of_speech() -> list[Any]:
        seen = []
        async for event in stream:  # no flush, no end_input: the endpoint fires by itself
            seen.append(event)
            if event.type == T.END_OF_SPEECH:
                break
        return seen

    seen = await asyncio.wait_for(until_end_of_speech(), timeout=60)
    await stream.aclose()
    assert [e.type for e in seen[-2:]] == [T.FINAL_TRANSCRIPT, T.END_OF_SPEECH]
    assert {"weather", "tomorrow"} <= words(seen[-2].alternatives[0].text)


@pytest.mark.parametrize(("rate", "ms"), [(48000, 10), (8000, 20)])
async def test_stream_resamples_other_rates(rate: int, ms: int) -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT

    stream = PocketSphinxSTT().stream()
    for frame in frames(silence(0.3, rate) + speech(RESEARCH, rate), rate=rate, ms=ms):
        stream.push_frame(frame)
    stream.end_input()
    finals = [e for e in await collect(stream) if e.type == T.FINAL_TRANSCRIPT]
    assert {"research", "solar"} <= words(finals[0].alternatives[0].text)


async def test_recognize_a_whole_buffer() -> None:
    from voicehub.voice.providers.offline import PocketSphinxSTT

    event = await PocketSphinxSTT().recognize(list(frames(speech(WEATHER, 24000), 24000)))
    assert {"weather", "tomorrow"} <= words(event.alternatives[0].text)


@pytest.mark.slow
def test_a_released_decoder_recognizes_as_a_fresh_one_after_a_phone_call() -> None:
    # Regression: the pool reset only the cepstral mean, and a decoder that had served a
    # live phone call recognized the next phone recording as noise.
    phone = audio.ulaw2lin(audio.lin2ulaw(speech(RESEARCH, 8000)))
    pool = DecoderPool(max_decoders=1)
    decoder = pool.acquire()
    fresh = recognize_pcm(decoder, phone, 8000).text
    pool.release(decoder)
    decoder = pool.acquire()
    recognizer = SphinxRecognizer(decoder, endpoint_silence=None)
    for frame in audio.FrameSplitter(8000).push(silence(0.5, 8000) + phone):
        recognizer.feed(frame, 8000)
    recognizer.finish()
    recognizer.close()
    pool.release(decoder)
    again = pool.acquire()
    assert again is decoder
    assert recognize_pcm(again, phone, 8000).text == fresh


# -- decoding in worker processes, decoders lent per utterance -------------------------------


@pytest.fixture(scope="module")
def one_decoder() -> Iterator[Any]:
    """One worker process with a single decoder: utterances take turns."""
    from voicehub.voice.providers.offline.sphinx_workers import SphinxWorkers

    workers = SphinxWorkers(processes=1, max_decoders=1, wait_timeout=120)
    workers.prewarm(1)
    yield workers
    workers.close()


@pytest.fixture(scope="module")
def two_decoders() -> Iterator[Any]:
    from voicehub.voice.providers.offline.sphinx_workers import SphinxWorkers

    workers = SphinxWorkers(processes=1, max_decoders=2, wait_timeout=120)
    workers.prewarm(2)
    yield workers
    workers.close()


async def speak_together(streams: list[Any], lines: list[bytes]) -> list[list[Any]]:
    """Push each stream its audio frame by frame, in step, then collect every stream."""
    from itertools import zip_longest

    for batch in zip_longest(*(frames(pcm) for pcm in lines)):
        for stream, frame in zip(streams, batch, strict=True):
            if frame is not None:
                stream.push_frame(frame)
    for stream in streams:
        stream.flush()
        stream.end_input()
    return list(await asyncio.gather(*(collect(stream) for stream in streams)))


def final_texts(events: list[Any]) -> list[str]:
    from livekit.agents.stt import SpeechEventType as T

    return [e.alternatives[0].text for e in events if e.type == T.FINAL_TRANSCRIPT]


@pytest.mark.slow
async def test_two_calls_decoding_at_once_each_get_their_own_words(two_decoders: Any) -> None:
    from voicehub.voice.providers.offline import PocketSphinxSTT

    stt = PocketSphinxSTT(workers=two_decoders)
    lines = [silence(0.3) + speech(RESEARCH) + silence(1.2), silence(0.3) + speech(WEATHER)]
    research, weather = await speak_together([stt.stream(), stt.stream()], lines)

    assert two_decoders.stats().peak_busy == 2  # they did decode at the same time
    assert {"research", "solar"} <= words(final_texts(research)[0])
    assert not words(final_texts(research)[0]) & {"weather", "tomorrow"}
    assert {"weather", "tomorrow"} <= words(final_texts(weather)[0])
    assert not words(final_texts(weather)[0]) & {"research", "solar"}
    assert two_decoders.stats().busy == 0  # every decoder back once the finals were out


@pytest.mark.slow
async def test_a_call_waits_for_a_busy_decoder_and_loses_nothing(one_decoder: Any) -> None:
    from voicehub.voice.providers.offline import PocketSphinxSTT

    stt = PocketSphinxSTT(workers=one_decoder, endpoint_silence=1.0)
    before = one_decoder.stats()
    lines = [silence(0.3) + speech(RESEARCH) + silence(1.2), silence(0.3) + speech(WEATHER)]
    research, weather = await speak_together([stt.stream(), stt.stream()], lines)

    stats = one_decoder.stats()
    assert (stats.built, stats.waits - before.waits, stats.timeouts) == (1, 1, 0)
    assert {"research", "solar"} <= words(final_texts(research)[0])
    # its speech waited in its recognizer until the other call's utterance ended
    assert {"weather", "tomorrow"} <= words(final_texts(weather)[0])


async def test_a_call_holds_a_decoder_only_while_an_utterance_is_decoded(
    one_decoder: Any,
) -> None:
    from voicehub.voice.providers.offline import PocketSphinxSTT

    stt = PocketSphinxSTT(workers=one_decoder, endpoint_silence=1.0)
    before = one_decoder.stats().acquired
    stream = stt.stream()
    for text in (RESEARCH, WEATHER):
        for frame in frames(silence(1.0) + speech(text) + silence(1.2)):
            stream.push_frame(frame)
    stream.end_input()
    finals = [text for text in final_texts(await collect(stream)) if text]
    assert {"research", "solar"} <= words(finals[0])
    assert {"weather", "tomorrow"} <= words(finals[1])
    stats = one_decoder.stats()
    # silence never reached a decoder: one loan per utterance, both returned
    assert stats.acquired - before == 2 and stats.busy == 0


async def test_no_decoder_runs_in_the_servers_process(two_decoders: Any) -> None:
    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT, decoder_pool

    stt = PocketSphinxSTT(workers=two_decoders, endpoint_silence=None)
    in_process = decoder_pool.built_shared_pool()
    lent_here = in_process.stats().acquired if in_process is not None else 0
    stream = stt.stream()
    pushed = list(frames(silence(0.4) + speech(RESEARCH)))
    for frame in pushed:
        stream.push_frame(frame)
    stream.flush()
    stream.end_input()
    events = await collect(stream)
    finals = [e.alternatives[0].text for e in events if e.type == T.FINAL_TRANSCRIPT]
    assert {"research", "solar"} <= words(finals[0])
    assert stream.worker_pid in two_decoders.pids and stream.worker_pid != os.getpid()
    in_process = decoder_pool.built_shared_pool()
    assert (in_process.stats().acquired if in_process is not None else 0) == lent_here
    # every frame and both flushes (ours and end_input's) were taken where they were
    # pushed: no task woke for them
    assert (stream.taken_inline, stream.taken_queued) == (len(pushed) + 2, 0)


@pytest.mark.slow
async def test_a_worker_that_dies_fails_its_streams_and_the_next_gets_a_new_one() -> None:
    import signal

    from livekit.agents.stt import SpeechEventType as T

    from voicehub.voice.providers.offline import PocketSphinxSTT
    from voicehub.voice.providers.offline.sphinx_workers import SphinxWorkers

    workers = SphinxWorkers(processes=1, max_decoders=1)
    try:
        stt = PocketSphinxSTT(workers=workers)
        stream = stt.stream()
        stream.push_frame(next(frames(silence(0.02))))
        (first,) = workers.pids
        os.kill(first, signal.SIGKILL)  # the worker this test started
        with pytest.raises(RuntimeError, match="worker process ended"):
            await collect(stream)
        again = stt.stream()
        for frame in frames(speech(WEATHER)):
            again.push_frame(frame)
        again.end_input()
        finals = [e for e in await collect(again) if e.type == T.FINAL_TRANSCRIPT]
        assert {"weather", "tomorrow"} <= words(finals[0].alternatives[0].text)
        assert again.worker_pid != first
    finally:
        workers.close()
