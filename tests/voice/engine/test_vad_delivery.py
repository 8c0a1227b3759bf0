"""Our VAD streams for any livekit consumer (`async for`, `stt.StreamAdapter`) and for the
engine's callback (`deliver_to`): the same events either way, in the same order."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.voice.providers.offline.test_vad import boundaries, frames, padded_speech, vad_events

RATE = 16000
KINDS = ["silero", "batched silero", "webrtc"]


def two_utterances() -> bytes:
    pcm, _ = padded_speech(RATE)
    return pcm + bytes(2 * RATE) + pcm


def make_vad(kind: str) -> Any:
    from tests.voice.providers.offline.test_vad import shared_vad
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD
    from voicehub.voice.providers.offline.vad import vad_for_call

    if kind == "batched silero":
        return BatchedSileroVAD(shared_vad("silero"))
    return vad_for_call(shared_vad(kind.split()[-1]))


def key(event: Any) -> tuple[Any, ...]:
    return (
        event.type,
        event.samples_index,
        event.speaking,
        event.probability,
        event.speech_duration,
        event.silence_duration,
        event.raw_accumulated_speech,
        [frame.data.tobytes() for frame in event.frames],
    )


def quiet(event: Any) -> bool:
    from livekit.agents.vad import VADEventType

    return (
        event.type == VADEventType.INFERENCE_DONE
        and not event.speaking
        and not event.speech_duration
        and not event.raw_accumulated_speech
    )


async def delivered(stream: Any, pcm: bytes, **options: Any) -> tuple[list[Any], list[Any]]:
    """Events `stream` hands to a sink (with `options`), and what its iterator still gives."""
    got: list[Any] = []
    stream.deliver_to(got.append, **options)
    return got, await fed(stream, pcm)


async def fed(stream: Any, pcm: bytes) -> list[Any]:
    """All of `pcm` pushed into `stream` (a VAD's or an STT's), and its events, read."""
    for frame in frames(pcm, RATE):
        stream.push_frame(frame)
    stream.end_input()
    try:  # the timeout only guards against a hang; all audio is already pushed
        return await asyncio.wait_for(_drain(stream), timeout=60)
    finally:
        await stream.aclose()


async def _drain(stream: Any) -> list[Any]:
    return [event async for event in stream]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_sink_gets_the_events_the_iterator_gets(kind: str) -> None:
    from voicehub.voice.engine import direct_events

    vad = make_vad(kind)
    pcm = two_utterances()
    expected = await vad_events(vad, pcm, RATE)
    assert [e.type.value for e in boundaries(expected)] == ["start_of_speech", "end_of_speech"] * 2

    stream = vad.stream()
    assert isinstance(stream, direct_events.DirectEvents)
    got, leftovers = await delivered(stream, pcm)
    assert leftovers == []  # none went to the iterator; it just ended
    assert [key(e) for e in got] == [key(e) for e in expected]

    speech, _ = await delivered(vad.stream(), pcm, inferences="speech")
    assert [key(e) for e in speech] == [key(e) for e in expected if not quiet(e)]
    assert sum(map(quiet, expected)) > 50  # most windows are quiet ones

    bounds, _ = await delivered(vad.stream(), pcm, inferences="none")
    assert [key(e) for e in bounds] == [key(e) for e in boundaries(expected)]


async def test_silero_events_reach_the_sink_from_the_batch_callback_not_a_task() -> None:
    """A batch's windows are decided in the callback that brings the probabilities: the
    sink runs there, with no task woken for it (nor one reading the stream)."""
    vad = make_vad("batched silero")
    callers: list[asyncio.Task[Any] | None] = []

    def sink(event: Any) -> None:
        callers.append(asyncio.current_task())

    stream = vad.stream()
    stream.deliver_to(sink, inferences="none")
    for frame in frames(two_utterances(), RATE):
        stream.push_frame(frame)
    stream.end_input()
    await asyncio.wait_for(_drain(stream), timeout=60)
    await stream.aclose()
    assert len(callers) == 4 and callers == [None] * 4


async def test_webrtc_events_reach_the_sink_inside_push_frame() -> None:
    vad = make_vad("webrtc")
    got: list[Any] = []
    stream = vad.stream()
    stream.deliver_to(got.append, inferences="none")
    for frame in frames(two_utterances(), RATE):
        stream.push_frame(frame)
    assert len(got) == 4  # before anything was awaited
    await stream.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_analysed_seconds_say_how_far_the_events_got(kind: str) -> None:
    """With no INFERENCE_DONE, `analysed_seconds` still says how much of the pushed audio is
    decided: at each boundary, up to the boundary's window; at the end, all of it (the
    last partial window dropped by the end counts)."""
    stream = make_vad(kind).stream()
    assert stream.analysed_seconds == 0.0
    at_boundaries: list[tuple[float, float]] = []
    stream.deliver_to(
        lambda e: at_boundaries.append((stream.analysed_seconds, e.samples_index / RATE)),
        inferences="none",
    )
    pushed = 0.0
    for frame in frames(two_utterances(), RATE):
        stream.push_frame(frame)
        pushed += frame.duration
    if kind == "webrtc":  # decided inside push_frame
        assert stream.analysed_seconds == pytest.approx(pushed)
    else:  # the windows wait for their batches: none is decided yet
        assert stream.analysed_seconds == 0.0
    stream.end_input()
    await asyncio.wait_for(_drain(stream), timeout=60)
    assert len(at_boundaries) == 4
    for analysed, boundary in at_boundaries:
        assert analysed == pytest.approx(boundary)
    assert stream.analysed_seconds == pytest.approx(pushed)
    await stream.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_metrics_are_reported_with_a_sink_too(kind: str) -> None:
    """livekit's metrics (one report per second of windows) also come when the sink gets
    no INFERENCE_DONE at all."""
    pcm = two_utterances()
    windows = sum(
        e.type.name == "INFERENCE_DONE" for e in await vad_events(make_vad(kind), pcm, RATE)
    )
    vad = make_vad(kind)
    counted: list[int] = []
    vad.on("metrics_collected", lambda metrics: counted.append(metrics.inference_count))
    await delivered(vad.stream(), pcm, inferences="none")
    per_report = math.ceil(1 / vad.capabilities.update_interval)
    assert sum(counted) == windows // per_report * per_report


async def test_a_failing_sink_is_logged_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[Any] = []

    def sink(event: Any) -> None:
        got.append(event)
        if len(got) == 1:
            raise ValueError("handler bug")

    stream = make_vad("batched silero").stream()
    with caplog.at_level(logging.ERROR, logger="voicehub.voice"):
        stream.deliver_to(sink, inferences="none")
        for frame in frames(two_utterances(), RATE):
            stream.push_frame(frame)
        stream.end_input()
        await asyncio.wait_for(_drain(stream), timeout=60)
    assert len(got) == 4
    assert "a VAD event sink failed on start_of_speech" in caplog.text


class _FailingModel:
    """The real model's shape and silent state, whose runs fail."""

    def __init__(self, model: Any) -> None:
        self.sample_rate = model.sample_rate
        self.window_size, self.context_size = model.window_size, model.context_size
        self.silent_state, self.silent_probability = model.silent_state, model.silent_probability
        self.executor = model.executor

    def infer(self, inputs: Any, state: Any) -> Any:
        raise RuntimeError("onnxruntime failed")


@pytest.mark.parametrize("with_sink", [False, True])
async def test_a_failed_inference_ends_the_stream_with_its_error(with_sink: bool) -> None:
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroBatcher

    shared = make_vad("silero")
    vad = BatchedSileroVAD(shared, SileroBatcher(_FailingModel(shared.silero_model)))  # type: ignore[arg-type]
    stream = vad.stream()
    if with_sink:
        stream.deliver_to(lambda event: None)
    for frame in frames(two_utterances(), RATE):
        stream.push_frame(frame)
    with pytest.raises(RuntimeError, match="onnxruntime failed"):
        await asyncio.wait_for(_drain(stream), timeout=60)
    with pytest.raises(RuntimeError, match="is closed"):
        stream.push_frame(next(frames(bytes(640), RATE)))
    await stream.aclose()


@pytest.mark.parametrize("kind", KINDS)
async def test_input_after_the_end_or_after_closing_is_refused(kind: str) -> None:
    frame = next(frames(bytes(640), RATE))
    ended = make_vad(kind).stream()
    ended.end_input()
    with pytest.raises(RuntimeError, match="input ended"):
        ended.push_frame(frame)
    closed = make_vad(kind).stream()
    closed.push_frame(frame)
    await closed.aclose()
    with pytest.raises(RuntimeError, match="is closed"):
        closed.push_frame(frame)
    assert await _drain(closed) == []
    await ended.aclose()


def test_an_unknown_inferences_option_is_named() -> None:
    async def build() -> None:
        stream = make_vad("webrtc").stream()
        try:
            with pytest.raises(ValueError, match="inferences='quiet'"):
                stream.deliver_to(lambda event: None, inferences="quiet")
        finally:
            await stream.aclose()

    asyncio.run(build())


class _Transcriber:
    """A non-streaming livekit STT that "recognizes" the duration of what it is given."""

    def __init__(self) -> None:
        from livekit.agents import stt, utils

        heard: list[bytes] = []

        class Recognizer(stt.STT):
            def __init__(self) -> None:
                super().__init__(
                    capabilities=stt.STTCapabilities(streaming=False, interim_results=False)
                )

            async def _recognize_impl(
                self, buffer: utils.AudioBuffer, **kwargs: Any
            ) -> stt.SpeechEvent:
                merged = utils.merge_frames(buffer)
                heard.append(merged.data.tobytes())
                text = f"{merged.duration:.2f} s"
                return stt.SpeechEvent(
                    type=stt.SpeechEventType.FINAL_TRANSCRIPT,
                    alternatives=[stt.SpeechData(language="en", text=text)],
                )

        self.stt = Recognizer()
        self.heard = heard


@pytest.mark.parametrize("kind", KINDS)
async def test_livekits_stream_adapter_recognizes_each_utterance(kind: str) -> None:
    """livekit's `StreamAdapter` (a non-streaming STT behind a VAD) reads our stream with
    `async for` and recognizes each END_OF_SPEECH's frames: the caller's whole utterance,
    with its pre-roll, as the input audio holds it."""
    from livekit.agents import stt

    vad = make_vad(kind)
    pcm = two_utterances()
    ends = [
        e for e in boundaries(await vad_events(vad, pcm, RATE)) if e.type.name == "END_OF_SPEECH"
    ]
    transcriber = _Transcriber()
    events = await fed(stt.StreamAdapter(stt=transcriber.stt, vad=vad).stream(), pcm)
    finals = [e for e in events if e.type == stt.SpeechEventType.FINAL_TRANSCRIPT]
    assert len(finals) == 2
    _, spoken = padded_speech(RATE)
    for audio, end in zip(transcriber.heard, ends, strict=True):
        stop = 2 * end.samples_index  # the input's rate is the model's: samples line up
        assert audio == pcm[stop - len(audio) : stop]
        assert spoken < len(audio) / 2 / RATE < spoken + 1.2  # pre-roll, speech, tail
