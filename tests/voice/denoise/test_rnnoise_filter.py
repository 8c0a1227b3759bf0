"""RNNoise on the caller's audio (`voicehub.voice.denoise`): frames in step at every call rate,
the int16 scale, the intake seam before the VAD and the recognizer, and what it decides on
committed phone recordings (tests/data/denoise, made by its script there)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voicehub.errors import ConfigError
from voicehub.voice.audio import int16_to_pcm16, pcm16_to_int16, read_wav
from voicehub.voice.denoise import PHONE_DENOISE, caller_filter, line_default
from voicehub.voice.denoise.rnnoise_library import RNNoiseState, rnnoise_frame_size
from voicehub.voice.denoise.stream import RNNoiseFilter
from voicehub.voice.engine.listening import CallerAudio
from voicehub.voice.speech_evidence import SpeechEvidence

DATA = Path(__file__).resolve().parents[2] / "data" / "denoise"


def frames_of(path: Path) -> tuple[list[bytes], int]:
    audio = read_wav(path)
    size = audio.sample_rate // 50 * 2
    pcm = audio.pcm16
    return [pcm[i : i + size] for i in range(0, len(pcm) - size + 1, size)], audio.sample_rate


def denoised(frames: list[bytes], rate: int) -> list[bytes]:
    f = RNNoiseFilter(rate)
    try:
        return [f.process(frame) for frame in frames]
    finally:
        f.close()


def level_db(pcm: bytes) -> float:
    samples = pcm16_to_int16(pcm).astype(np.float64)
    return float(20 * np.log10(np.sqrt(np.mean(samples**2)) + 1e-9))


def test_the_library_runs_10_ms_frames_at_48_khz() -> None:
    assert rnnoise_frame_size() == 480
    state = RNNoiseState()
    with pytest.raises(ValueError, match="480 samples at 48 kHz"):
        state.process(np.zeros(160, dtype=np.int16))
    state.close()
    state.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        state.process(np.zeros(480, dtype=np.int16))


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 44100, 48000])
def test_every_frame_comes_out_whole_and_in_step(rate: int) -> None:
    f = RNNoiseFilter(rate)
    rng = np.random.default_rng(rate)
    size = rate // 50
    outputs = [
        f.process(int16_to_pcm16(rng.integers(-4000, 4000, size, dtype=np.int16)))
        for _ in range(60)
    ]
    assert {len(out) for out in outputs} == {2 * size}
    # a chunk of another size (a transport's odd packet) gives as many samples back
    assert len(f.process(bytes(2 * 37))) == 2 * 37
    assert f.process(b"") == b""
    f.close()


def test_the_same_audio_gives_the_same_output() -> None:
    frames, rate = frames_of(DATA / "request_car_0db_8k.wav")
    assert denoised(frames, rate) == denoised(frames, rate)


def test_speech_keeps_its_level_on_the_int16_scale() -> None:
    # RNNoise takes floats on the int16 scale: scaled to -1..1 it would hear near-silence
    # and return nothing. A clean phone request comes through within 3 dB.
    frames, rate = frames_of(DATA / "request_8k.wav")
    out = denoised(frames, rate)
    speech = slice(25, 125)  # the words, past the half second of silence
    before = level_db(b"".join(frames[speech]))
    after = level_db(b"".join(out[speech]))
    assert after > before - 3.0


def test_car_noise_is_suppressed_and_no_longer_counts_as_the_caller() -> None:
    frames, rate = frames_of(DATA / "car_8k.wav")
    out = denoised(frames, rate)
    assert level_db(b"".join(out[10:])) < level_db(b"".join(frames[10:])) - 30.0
    raw_evidence, clean_evidence = SpeechEvidence(rate), SpeechEvidence(rate)
    voiced_raw = sum(raw_evidence.voiced_frames(frame) for frame in frames)
    voiced_clean = sum(clean_evidence.voiced_frames(frame) for frame in out)
    # as heard, the engine takes the car for a caller speaking (a result would wait): with
    # RNNoise no frame of it is speech-like
    assert voiced_raw > len(frames) // 2
    assert voiced_clean == 0


def test_a_request_in_car_noise_keeps_its_words() -> None:
    frames, rate = frames_of(DATA / "request_car_0db_8k.wav")
    clean, _ = frames_of(DATA / "request_8k.wav")
    out = denoised(frames, rate)
    words, pause = slice(30, 120), slice(5, 22)
    # the pause before the words loses the noise; the words stay near their clean level
    assert level_db(b"".join(out[pause])) < level_db(b"".join(frames[pause])) - 20.0
    assert level_db(b"".join(out[words])) > level_db(b"".join(clean[words])) - 4.0


class Recorder:
    """Stands for the VAD and recognizer streams: keeps the frames pushed."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def push_frame(self, frame: object) -> None:
        self.frames.append(bytes(frame.data.cast("B")))  # type: ignore[attr-defined]


class Inverter:
    def __init__(self) -> None:
        self.closed = False

    def process(self, pcm16: bytes) -> bytes:
        return int16_to_pcm16(~pcm16_to_int16(pcm16))

    def close(self) -> None:
        self.closed = True


def test_the_vad_hears_the_filtered_frame_and_the_recognizer_the_frame_as_sent() -> None:
    voiced: list[int] = []
    inverter = Inverter()
    caller = CallerAudio(8000, lambda: voiced.append(1), intake=inverter)
    vad, stt = Recorder(), Recorder()
    caller.feed(vad, stt)
    frame = int16_to_pcm16(np.arange(160, dtype=np.int16))
    caller.push(frame[:100])
    caller.push(frame[100:])
    assert vad.frames == [int16_to_pcm16(~np.arange(160, dtype=np.int16))]
    assert stt.frames == [frame]
    caller.close()
    assert inverter.closed


def test_on_a_car_call_turn_taking_hears_rnnoise_and_the_recognizer_the_line() -> None:
    """The product's split on the committed request in car noise at 0 dB: the VAD gets
    exactly RNNoise's output, the recognizer exactly the caller's samples, and the speech
    evidence (a result's hold, the agent's pause) judges the denoised audio."""
    frames, rate = frames_of(DATA / "request_car_0db_8k.wav")
    noise, _ = frames_of(DATA / "car_8k.wav")
    voiced_at: list[int] = []  # the frame count at each speech-like frame
    caller = CallerAudio(rate, lambda: voiced_at.append(caller.frames), intake=RNNoiseFilter(rate))
    vad, stt = Recorder(), Recorder()
    caller.feed(vad, stt)
    for frame in noise + frames:
        caller.push(frame)
    caller.close()
    assert stt.frames == noise + frames
    assert vad.frames == denoised(noise + frames, rate)
    assert vad.frames != stt.frames
    # two seconds of car alone voiced nothing (heard as sent, most of its frames count as
    # the caller: test_car_noise_is_suppressed...); the words did
    assert voiced_at and min(voiced_at) > len(noise)


def test_the_desk_setting_and_the_line_default() -> None:
    assert caller_filter("off", 8000) is None
    made = caller_filter("rnnoise", 16000)
    assert isinstance(made, RNNoiseFilter)
    made.close()
    assert line_default(16000) == "off"
    assert line_default(8000) == PHONE_DENOISE
    unset = caller_filter(None, 8000)
    assert (unset is None) == (PHONE_DENOISE == "off")
    with pytest.raises(ConfigError, match="expected 'rnnoise' or 'off'"):
        caller_filter("speex", 8000)  # type: ignore[arg-type]
