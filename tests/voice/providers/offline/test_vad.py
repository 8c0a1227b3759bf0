"""Offline VAD: the sans-I/O segmenter, the WebRTC plugin and Silero, on synthesized speech."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from tests.support.speech import spoken
from voicehub.errors import MissingExtraError
from voicehub.voice import audio
from voicehub.voice.providers.offline.vad_segmenter import (
    SpeechSegmenter,
    Transition,
)

FRAME = bytes(640)  # 20 ms at 16 kHz
PAD = 0.8  # seconds of silence around the speech


def run_segmenter(decisions: str, min_speech: float, min_silence: float) -> list[Any]:
    """Feed one 20 ms frame per character ('S' speech, '.' silence); list the transitions."""
    segmenter = SpeechSegmenter(
        16000, min_speech_duration=min_speech, min_silence_duration=min_silence
    )
    out: list[tuple[int, Transition]] = []
    for index, mark in enumerate(decisions):
        transition = segmenter.process(FRAME, mark == "S")
        if transition is not Transition.NONE:
            out.append((index, transition))
    return out


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        ("." * 50, []),
        ("S" + "." * 30, []),  # a 20 ms click is not speech
        ("..SSS" + "." * 30, [(4, Transition.STARTED), (14, Transition.ENDED)]),
        # a 100 ms pause inside speech does not split it
        ("SSSS.....SSSS" + "." * 20, [(2, Transition.STARTED), (22, Transition.ENDED)]),
        ("SSS" + "." * 17 + "SSS", [(2, Transition.STARTED), (12, Transition.ENDED),
                                    (22, Transition.STARTED)]),
    ],
)  # fmt: skip
def test_segmenter_hysteresis(decisions: str, expected: list[tuple[int, Transition]]) -> None:
    # 20 ms frames: speech starts on the 3rd speech frame, ends on the 10th silent one
    assert run_segmenter(decisions, min_speech=0.06, min_silence=0.2) == expected


def test_segmenter_audio_has_pre_roll_and_the_whole_segment() -> None:
    segmenter = SpeechSegmenter(16000, prefix_padding_duration=0.3, min_silence_duration=0.1)
    frames = [bytes([i]) * 640 for i in range(60)]  # each frame recognizable by its bytes
    decisions = [20 <= i < 40 for i in range(60)]
    captured = {}
    for frame, speech in zip(frames, decisions, strict=True):
        transition = segmenter.process(frame, speech)
        if transition is not Transition.NONE:
            captured[transition] = (segmenter.speech_audio(), segmenter.speech_duration)
    start_audio, start_speech = captured[Transition.STARTED]
    assert start_audio == b"".join(frames[5:23])  # 300 ms (15 frames) of pre-roll + 3 speech
    assert start_speech == pytest.approx(0.06)
    end_audio, end_speech = captured[Transition.ENDED]
    assert end_audio == b"".join(frames[5:45])  # the speech, then 100 ms of tail
    assert end_speech == pytest.approx(0.4)  # 20 frames of speech, the tail excluded
    assert segmenter.silence_duration == pytest.approx(0.4)  # 100 ms tail + 15 frames after


def test_segmenter_reset_forgets_the_segment() -> None:
    segmenter = SpeechSegmenter(16000)
    for _ in range(5):
        segmenter.process(FRAME, True)
    assert segmenter.speaking
    segmenter.reset()
    assert not segmenter.speaking and segmenter.speech_audio() == b"" and segmenter.elapsed == 0


# -- livekit plugins on real speech -------------------------------------------------------


@cache
def padded_speech(rate: int) -> tuple[bytes, float]:
    """Speech with PAD seconds of silence each side, and the speech's duration."""
    voiced = spoken("please research solar panels", rate=rate)
    pad = bytes(2 * int(PAD * rate))
    return pad + voiced + pad, len(voiced) / 2 / rate


def frames(pcm: bytes, rate: int, ms: int = 20) -> Iterator[Any]:
    from livekit import rtc

    size = rate * ms // 1000 * 2
    for start in range(0, len(pcm), size):
        chunk = pcm[start : start + size].ljust(size, b"\x00")
        yield rtc.AudioFrame(chunk, rate, 1, size // 2)


async def vad_events(vad: Any, pcm: bytes, rate: int, ms: int = 20) -> list[Any]:
    stream = vad.stream()
    for frame in frames(pcm, rate, ms):
        stream.push_frame(frame)
    stream.end_input()

    async def drain() -> list[Any]:
        return [event async for event in stream]

    try:  # the timeout only guards against a hang; all audio is already pushed
        return await asyncio.wait_for(drain(), timeout=60)
    finally:
        await stream.aclose()


@cache
def shared_vad(kind: str) -> Any:
    from voicehub.voice.providers.offline import load_vad

    return load_vad(kind)  # type: ignore[arg-type]


def boundaries(events: list[Any]) -> list[Any]:
    from livekit.agents.vad import VADEventType

    return [e for e in events if e.type != VADEventType.INFERENCE_DONE]


@pytest.mark.parametrize("kind", ["webrtc", "silero"])
@pytest.mark.parametrize("rate", [16000, 8000])
async def test_detects_start_and_end_of_padded_speech(kind: str, rate: int) -> None:
    from livekit.agents.vad import VADEventType

    pcm, spoken = padded_speech(rate)
    events = await vad_events(shared_vad(kind), pcm, rate)
    start, end = boundaries(events)
    assert (start.type, end.type) == (VADEventType.START_OF_SPEECH, VADEventType.END_OF_SPEECH)
    assert PAD <= start.timestamp <= PAD + 0.3
    assert PAD + spoken <= end.timestamp <= PAD + spoken + 0.7
    assert end.speech_duration == pytest.approx(spoken, abs=0.4)
    segment = sum(frame.duration for frame in end.frames)
    assert spoken < segment < spoken + 1.2  # pre-roll + speech + trailing silence
    assert sum(frame.duration for frame in start.frames) >= 0.3  # the pre-roll is there


@pytest.mark.parametrize("kind", ["webrtc", "silero"])
async def test_no_speech_in_silence_or_faint_noise(kind: str) -> None:
    from livekit.agents.vad import VADEventType

    noise = np.random.default_rng(7).normal(0, 30, 16000 * 2)  # about -60 dBFS
    pcm = bytes(32000) + audio.int16_to_pcm16(np.rint(noise))
    events = await vad_events(shared_vad(kind), pcm, 16000)
    assert boundaries(events) == []
    inferences = [e for e in events if e.type == VADEventType.INFERENCE_DONE]
    assert inferences and not any(e.speaking for e in inferences)


async def test_webrtc_reframes_odd_chunk_sizes_into_20ms_frames() -> None:
    pcm, _ = padded_speech(16000)
    vad = shared_vad("webrtc")
    reference = [(e.type, e.timestamp) for e in boundaries(await vad_events(vad, pcm, 16000))]
    for ms in (7, 50):  # not sizes WebRTC accepts, so cut into 20 ms frames
        reframed = boundaries(await vad_events(vad, pcm, 16000, ms))
        assert [(e.type, e.timestamp) for e in reframed] == reference


async def test_webrtc_resamples_unsupported_rates() -> None:
    pcm, _ = padded_speech(24000)
    start, end = boundaries(await vad_events(shared_vad("webrtc"), pcm, 24000))
    assert PAD <= start.timestamp <= PAD + 0.3
    assert end.frames[0].sample_rate == 16000


async def test_webrtc_emits_an_inference_per_20ms_frame() -> None:
    from livekit.agents.vad import VADEventType

    events = await vad_events(shared_vad("webrtc"), bytes(640 * 10), 16000)
    inferences = [e for e in events if e.type == VADEventType.INFERENCE_DONE]
    assert len(inferences) == 10
    assert inferences[-1].samples_index == 3200
    assert inferences[-1].timestamp == pytest.approx(0.2)
    assert inferences[0].frames[0].samples_per_channel == 320


def test_bad_vad_options_are_named() -> None:
    from voicehub.voice.providers.offline import WebRtcVAD, load_vad

    with pytest.raises(ValueError, match="unknown VAD kind 'energy'"):
        load_vad("energy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode must be 0, 1, 2 or 3, got 7"):
        WebRtcVAD(mode=7)


def test_missing_packages_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import voicehub.voice.providers.offline as offline
    from voicehub.voice.providers.offline import WebRtcVAD

    monkeypatch.setitem(sys.modules, "webrtcvad", None)  # makes `import webrtcvad` fail
    with pytest.raises(MissingExtraError, match=r"webrtcvad-wheels .*voicehub\[voice\]"):
        WebRtcVAD()

    monkeypatch.setitem(sys.modules, "livekit", None)
    monkeypatch.delitem(sys.modules, "voicehub.voice.providers.offline.vad")
    with pytest.raises(MissingExtraError, match="livekit-agents is not installed"):
        offline.load_vad  # noqa: B018  (the lazy import is what fails)


def test_a_missing_silero_model_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from voicehub.errors import VoicehubError
    from voicehub.voice.providers.offline.silero_model import SileroModel

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingExtraError, match=r"onnxruntime .*voicehub\[voice\]"):
        SileroModel()
    monkeypatch.undo()

    def no_distribution(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "files", no_distribution)
    with pytest.raises(MissingExtraError, match=r"livekit-plugins-silero .*voicehub\[voice\]"):
        SileroModel()
    monkeypatch.setattr(metadata, "files", lambda name: [])
    with pytest.raises(VoicehubError, match=r"installed without its silero_vad\.onnx"):
        SileroModel()


def test_each_call_gets_its_own_vad_object_on_the_shared_model() -> None:
    from voicehub.voice.providers.offline import load_vad
    from voicehub.voice.providers.offline.silero_batch import BatchedSileroVAD, SileroVAD
    from voicehub.voice.providers.offline.vad import WebRtcVAD, vad_for_call

    shared = load_vad("silero")
    assert isinstance(shared, SileroVAD)
    mine = vad_for_call(shared)
    assert isinstance(mine, SileroVAD) and mine is not shared
    assert mine.silero_model is shared.silero_model  # one model, loaded once
    batched = BatchedSileroVAD(shared)
    theirs = vad_for_call(batched)
    assert isinstance(theirs, BatchedSileroVAD) and theirs.batcher is batched.batcher
    webrtc = WebRtcVAD(mode=2, min_silence_duration=0.5)
    copy = vad_for_call(webrtc)
    assert isinstance(copy, WebRtcVAD) and copy is not webrtc
    assert (copy.mode, copy.min_silence_duration) == (2, 0.5)


def _event_key(event: Any) -> tuple[Any, ...]:
    return (
        event.type,
        event.samples_index,
        event.timestamp,
        event.speech_duration,
        event.silence_duration,
        event.probability,
        event.speaking,
        event.raw_accumulated_silence,
        event.raw_accumulated_speech,
        [(f.sample_rate, f.data.tobytes()) for f in event.frames],
    )


async def test_silero_decides_exactly_as_livekits_silero_plugin() -> None:
    """With the silence gate off, every event equals livekit-plugins-silero's, field for
    field and sample for sample: its options, its model file, its rules."""
    from livekit.plugins import silero

    from voicehub.voice.providers.offline.silero_batch import SileroVAD
    from voicehub.voice.providers.offline.silero_model import SileroOptions

    options = {"min_speech_duration": 0.06, "min_silence_duration": 0.35}
    theirs = silero.VAD.load(**options, prefix_padding_duration=0.3, max_buffered_speech=1.0)
    ours = SileroVAD.load(
        SileroOptions(
            **options, prefix_padding_duration=0.3, max_buffered_speech=1.0, silent_peak_dbfs=None
        )
    )
    # two utterances (the second outlasts the 1 s speech buffer), 5 s of silence between
    pcm, _ = padded_speech(16000)
    pcm = pcm + bytes(2 * 16000 * 5) + pcm
    expected = await vad_events(theirs, pcm, 16000)
    got = await vad_events(ours, pcm, 16000)
    assert [e.type.value for e in boundaries(got)] == ["start_of_speech", "end_of_speech"] * 2
    assert [_event_key(e) for e in got] == [_event_key(e) for e in expected]


def assert_same_segments_near(got: list[Any], expected: list[Any], pcm: bytes) -> None:
    """Resampled input: livekit's resampler dithers (its output differs from run to run by
    a unit), so the probabilities differ slightly; the segments are the same to a window
    (512 samples at 16 kHz), and every boundary carries the caller's audio up to it."""
    ours, theirs = boundaries(got), boundaries(expected)
    assert [e.type for e in ours] == [e.type for e in theirs]
    for event, reference in zip(ours, theirs, strict=True):
        assert abs(event.samples_index - reference.samples_index) <= 512
        audio = event.frames[0].data.tobytes()
        stop = event.samples_index  # 16 kHz model samples: bytes of 8 kHz audio
        assert audio == pcm[stop - len(audio) : stop]


async def test_silero_resampled_input_decides_as_livekits_plugin() -> None:
    """8 kHz input on the 16 kHz model, as livekit's plugin resamples and decides it."""
    from livekit.plugins import silero

    from voicehub.voice.providers.offline.silero_batch import SileroVAD
    from voicehub.voice.providers.offline.silero_model import SileroOptions

    options = {"min_speech_duration": 0.06, "min_silence_duration": 0.35}
    theirs = silero.VAD.load(**options, prefix_padding_duration=0.3)
    ours = SileroVAD.load(
        SileroOptions(**options, prefix_padding_duration=0.3, silent_peak_dbfs=None)
    )
    pcm, _ = padded_speech(8000)
    expected = await vad_events(theirs, pcm, 8000)
    got = await vad_events(ours, pcm, 8000)
    assert len(got) == len(expected)
    assert_same_segments_near(got, expected, pcm)
