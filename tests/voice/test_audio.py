"""Tests for voicehub.voice.audio: PCM16, G.711, resampling, framing, WAV, level."""

from __future__ import annotations

import hashlib
import io
import math
import wave
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicehub.errors import ProtocolError
from voicehub.voice import audio

ALL_INT16 = np.arange(-32768, 32768, dtype=np.int16)
samples_16 = st.lists(st.integers(-32768, 32767), max_size=400)


def sine(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 10000) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return np.rint(amplitude * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.argmax(spectrum) * rate / len(samples))


# -- PCM16 --------------------------------------------------------------------------------


def test_pcm16_round_trip() -> None:
    values = np.array([0, 1, -1, 32767, -32768, 1234], dtype=np.int16)
    pcm = audio.int16_to_pcm16(values)
    assert pcm == values.astype("<i2").tobytes()
    assert np.array_equal(audio.pcm16_to_int16(pcm), values)


def test_odd_pcm16_frame_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="PCM16 frame has 321 bytes: expected an even number"):
        audio.pcm16_to_int16(bytes(321))


def test_float_conversion_scales_and_clips() -> None:
    pcm = audio.float32_to_pcm16([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0])
    assert list(audio.pcm16_to_int16(pcm)) == [0, 16384, -16384, 32767, -32768, 32767, -32768]
    assert audio.pcm16_to_float32(audio.int16_to_pcm16([16384, -32768])).tolist() == [0.5, -1.0]


# -- G.711 --------------------------------------------------------------------------------
# Reference: a line-by-line transliteration of the Sun/CCITT C code that audioop uses.

_ULAW_SEG_END = (0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF)
_ALAW_SEG_END = (0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF)


def _search(value: int, table: tuple[int, ...]) -> int:
    return next((i for i, end in enumerate(table) if value <= end), len(table))


def reference_lin2ulaw(sample: int) -> int:
    pcm = sample >> 2
    if pcm < 0:
        pcm, mask = -pcm, 0x7F
    else:
        mask = 0xFF
    pcm = min(pcm, 8159) + (0x84 >> 2)
    seg = _search(pcm, _ULAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    return ((seg << 4) | ((pcm >> (seg + 1)) & 0xF)) ^ mask


def reference_lin2alaw(sample: int) -> int:
    pcm = sample >> 3
    if pcm >= 0:
        mask = 0xD5
    else:
        mask, pcm = 0x55, -pcm - 1
    seg = _search(pcm, _ALAW_SEG_END)
    if seg >= 8:
        return 0x7F ^ mask
    quant = (pcm >> 1) if seg < 2 else (pcm >> seg)
    return ((seg << 4) | (quant & 0xF)) ^ mask


def reference_ulaw2lin(code: int) -> int:
    u = ~code & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return 0x84 - t if u & 0x80 else t - 0x84


def reference_alaw2lin(code: int) -> int:
    a = code ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    if seg == 0:
        t += 8
    elif seg == 1:
        t += 0x108
    else:
        t = (t + 0x108) << (seg - 1)
    return t if a & 0x80 else -t


# sha256 of audioop's output over every int16 value (encode) or every code (decode),
# recorded once with CPython 3.11's audioop.
AUDIOOP_SHA256 = {
    "lin2ulaw": "81d633c9e6972a18c74a58720b96cb8ca0bdd096d4060b646dd708c3b846019a",
    "lin2alaw": "38488f6fd710f4686360edc4d38639f96c491595ef93f8eb8d62d5e07ca6ce7b",
    "ulaw2lin": "3dab54339e520bb2c924826e3b72a917a2b612e9fd12fc867500f1d983a75827",
    "alaw2lin": "e04788d110e58ff8c70c93b8480190d973e3b67876b6119abbaec766cc75c174",
}


@pytest.mark.parametrize(
    ("sample", "ulaw", "alaw"),
    [
        (0, 0xFF, 0xD5),
        (-1, 0x7E, 0x55),  # the arithmetic shift makes -1 a magnitude of 1 in mu-law
        (4, 0xFE, 0xD5),
        (8, 0xFE, 0xD5),
        (100, 0xF2, 0xD3),
        (-100, 0x72, 0x53),
        (1000, 0xCE, 0xFA),
        (-5000, 0x2B, 0x06),
        (12345, 0x97, 0xBD),
        (32635, 0x80, 0xAA),
        (32767, 0x80, 0xAA),
        (-32768, 0x00, 0x2A),
    ],
)
def test_g711_encode_known_values(sample: int, ulaw: int, alaw: int) -> None:
    pcm = audio.int16_to_pcm16([sample])
    assert audio.lin2ulaw(pcm) == bytes([ulaw])
    assert audio.lin2alaw(pcm) == bytes([alaw])


@pytest.mark.parametrize(
    ("code", "ulaw_value", "alaw_value"),
    [(0x00, -32124, -5504), (0x7F, 0, -848), (0x80, 32124, 5504), (0xFF, 0, 848),
     (0x55, -716, -8), (0xD5, 716, 8), (0xAA, 5372, 32256), (0x2A, -5372, -32256)],
)  # fmt: skip
def test_g711_decode_known_values(code: int, ulaw_value: int, alaw_value: int) -> None:
    assert audio.pcm16_to_int16(audio.ulaw2lin(bytes([code]))).tolist() == [ulaw_value]
    assert audio.pcm16_to_int16(audio.alaw2lin(bytes([code]))).tolist() == [alaw_value]


def test_g711_is_bit_exact_with_the_reference_algorithm_for_every_input() -> None:
    pcm = audio.int16_to_pcm16(ALL_INT16)
    codes = bytes(range(256))
    values = ALL_INT16.tolist()
    assert audio.lin2ulaw(pcm) == bytes(reference_lin2ulaw(v) for v in values)
    assert audio.lin2alaw(pcm) == bytes(reference_lin2alaw(v) for v in values)
    assert audio.ulaw2lin(codes) == audio.int16_to_pcm16([reference_ulaw2lin(c) for c in codes])
    assert audio.alaw2lin(codes) == audio.int16_to_pcm16([reference_alaw2lin(c) for c in codes])


def test_g711_matches_recorded_audioop_output() -> None:
    pcm = audio.int16_to_pcm16(ALL_INT16)
    codes = bytes(range(256))
    outputs = {
        "lin2ulaw": audio.lin2ulaw(pcm),
        "lin2alaw": audio.lin2alaw(pcm),
        "ulaw2lin": audio.ulaw2lin(codes),
        "alaw2lin": audio.alaw2lin(codes),
    }
    assert {k: hashlib.sha256(v).hexdigest() for k, v in outputs.items()} == AUDIOOP_SHA256


@given(samples_16)
def test_ulaw_round_trip_keeps_about_five_bits(values: list[int]) -> None:
    pcm = audio.int16_to_pcm16(values)
    encoded = audio.lin2ulaw(pcm)
    decoded = audio.pcm16_to_int16(audio.ulaw2lin(encoded)).astype(int)
    assert len(encoded) == len(values)
    for original, back in zip(values, decoded, strict=True):
        assert abs(back - original) <= 36 + 0.036 * abs(original)
    assert audio.lin2ulaw(audio.ulaw2lin(encoded)) == encoded  # decoding lands on the code


@given(samples_16)
def test_alaw_round_trip_keeps_about_five_bits(values: list[int]) -> None:
    encoded = audio.lin2alaw(audio.int16_to_pcm16(values))
    decoded = audio.pcm16_to_int16(audio.alaw2lin(encoded)).astype(int)
    for original, back in zip(values, decoded, strict=True):
        assert abs(back - original) <= 32 + 0.032 * abs(original)
    assert audio.lin2alaw(audio.alaw2lin(encoded)) == encoded


@given(st.binary(max_size=300))
def test_every_ulaw_byte_stream_decodes_and_reencodes(codes: bytes) -> None:
    decoded = audio.ulaw2lin(codes)
    assert len(decoded) == 2 * len(codes)
    # 0x7F and 0xFF both mean zero; every other code survives a round trip.
    assert audio.lin2ulaw(decoded) == codes.replace(b"\x7f", b"\xff")


# -- Resampling ---------------------------------------------------------------------------

RATE_PAIRS = [
    (8000, 16000),
    (16000, 8000),
    (22050, 16000),
    (16000, 22050),
    (24000, 16000),
    (48000, 16000),
    (16000, 48000),
    (48000, 8000),
    (22050, 8000),
]


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS)
def test_resampling_preserves_a_sine(from_rate: int, to_rate: int) -> None:
    out = audio.resample(sine(1000, from_rate), from_rate, to_rate)
    assert len(out) == to_rate
    assert dominant_frequency(out, to_rate) == pytest.approx(1000, abs=2)
    expected = sine(1000, to_rate)
    middle = slice(100, -100)  # away from the edges, where the input starts abruptly
    error = out[middle].astype(float) - expected[middle]
    assert math.sqrt(np.mean(error**2)) < 2.0  # under 2 LSB rms against a 10000 amplitude


@pytest.mark.parametrize(("from_rate", "to_rate"), [(48000, 8000), (22050, 8000)])
def test_resampling_removes_tones_above_the_new_nyquist(from_rate: int, to_rate: int) -> None:
    out = audio.resample(sine(5000, from_rate), from_rate, to_rate)
    assert audio.rms(out[200:-200]) < 3  # a 7071 rms tone, suppressed by over 65 dB


@pytest.mark.parametrize(("from_rate", "to_rate"), RATE_PAIRS[:4])
@given(chunk_sizes=st.lists(st.integers(1, 700), min_size=1, max_size=30))
def test_streaming_resampler_matches_one_shot(
    from_rate: int, to_rate: int, chunk_sizes: list[int]
) -> None:
    signal = sine(440, from_rate, seconds=sum(chunk_sizes) / from_rate)
    resampler = audio.Resampler(from_rate, to_rate)
    parts, start = [], 0
    for size in chunk_sizes:
        parts.append(resampler.push(signal[start : start + size]))
        start += size
    parts.append(resampler.flush())
    assert np.array_equal(np.concatenate(parts), audio.resample(signal, from_rate, to_rate))


def test_equal_rates_pass_through_and_bad_rates_are_rejected() -> None:
    signal = sine(300, 16000, 0.1)
    assert np.array_equal(audio.resample(signal, 16000, 16000), signal)
    assert audio.resample_pcm16(b"\x01\x02", 8000, 8000) == b"\x01\x02"
    with pytest.raises(ValueError, match="sample rates must be positive"):
        audio.Resampler(0, 16000)
    with pytest.raises(ValueError, match="too fine"):
        audio.Resampler(16000, 16001)


# -- Framing ------------------------------------------------------------------------------


def test_frame_sizes() -> None:
    assert audio.frame_bytes(16000) == 640
    assert audio.frame_bytes(8000, sample_width=1) == 160
    assert audio.frame_bytes(48000, 10) == 960
    with pytest.raises(ValueError, match="not a whole number of samples"):
        audio.frame_bytes(22050, 1)


def test_check_frame_names_the_size() -> None:
    audio.check_frame(bytes(640), 16000)
    with pytest.raises(ProtocolError, match=r"PCM16 frame has 500 bytes: expected 640 \(20 ms"):
        audio.check_frame(bytes(500), 16000)
    with pytest.raises(ProtocolError, match="8-bit frame has 100 bytes: expected 160"):
        audio.check_frame(bytes(100), 8000, sample_width=1)


@given(chunks=st.lists(st.binary(max_size=1500), max_size=20))
def test_frame_splitter_cuts_fixed_frames_and_keeps_the_rest(chunks: list[bytes]) -> None:
    splitter = audio.FrameSplitter(16000)
    frames = [frame for chunk in chunks for frame in splitter.push(chunk)]
    stream = b"".join(chunks)
    assert all(len(frame) == 640 for frame in frames)
    assert b"".join(frames) == stream[: len(frames) * 640]
    assert splitter.pending == len(stream) % 640
    last = splitter.flush()
    if len(stream) % 640:
        assert last == stream[len(frames) * 640 :].ljust(640, b"\x00")
    else:
        assert last is None
    assert splitter.pending == 0


def test_frame_splitter_flush_without_padding() -> None:
    splitter = audio.FrameSplitter(8000, sample_width=1)
    assert splitter.push(bytes(200)) == [bytes(160)]
    assert splitter.flush(pad=False) == bytes(40)


# -- WAV and level ------------------------------------------------------------------------


def test_wav_round_trip_through_a_file(tmp_path: Path) -> None:
    pcm = audio.int16_to_pcm16(sine(440, 16000, 0.25))
    path = tmp_path / "tone.wav"
    audio.write_wav(path, pcm, 16000)
    loaded = audio.read_wav(path)
    assert loaded == audio.PcmAudio(pcm, 16000)
    assert loaded.duration == pytest.approx(0.25)
    assert audio.read_wav(io.BytesIO(audio.wav_bytes(pcm, 8000))).sample_rate == 8000


def test_stereo_wav_is_mixed_down() -> None:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(audio.int16_to_pcm16([100, 300, -50, -150]))
    buffer.seek(0)
    assert audio.pcm16_to_int16(audio.read_wav(buffer).pcm16).tolist() == [200, -100]


def test_unsupported_wav_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "eight_bit.wav"
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(8000)
        wav.writeframes(bytes(80))
    with pytest.raises(ValueError, match=r"eight_bit\.wav: WAV has 8-bit samples"):
        audio.read_wav(path)
    (tmp_path / "junk.wav").write_bytes(b"not a wav file")
    with pytest.raises(ValueError, match=r"junk\.wav: not a readable PCM WAV file"):
        audio.read_wav(tmp_path / "junk.wav")


def test_rms_and_dbfs() -> None:
    tone = sine(1000, 16000, amplitude=16384)
    assert audio.rms(tone) == pytest.approx(16384 / math.sqrt(2), rel=1e-3)
    assert audio.rms(audio.int16_to_pcm16(tone)) == pytest.approx(audio.rms(tone))
    assert audio.dbfs(tone) == pytest.approx(-9.03, abs=0.01)
    assert audio.rms(b"") == 0.0
    assert audio.dbfs(bytes(320)) == -math.inf


def test_energy_above_tells_phone_audio_from_wideband() -> None:
    noise = np.random.default_rng(3).normal(0, 3000, 8000)
    wideband = np.clip(np.rint(noise), -32768, 32767).astype(np.int16)
    phone = audio.resample(audio.resample(wideband, 16000, 8000), 8000, 16000)
    assert audio.energy_above(wideband, 16000, 4500) > 0.3  # white noise: about 44%
    assert audio.energy_above(phone, 16000, 4500) < 1e-6
    assert audio.energy_above(np.zeros(320), 16000, 4500) == 0.0
