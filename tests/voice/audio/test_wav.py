"""Tests for voicehub.voice.audio.wav."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest

from tests.voice.audio.signals import sine
from voicehub.voice.audio.pcm import int16_to_pcm16, pcm16_to_int16
from voicehub.voice.audio.wav import PcmAudio, read_wav, wav_bytes, write_wav


def test_wav_round_trip_through_a_file(tmp_path: Path) -> None:
    pcm = int16_to_pcm16(sine(440, 16000, 0.25))
    path = tmp_path / "tone.wav"
    write_wav(path, pcm, 16000)
    loaded = read_wav(path)
    assert loaded == PcmAudio(pcm, 16000)
    assert loaded.duration == pytest.approx(0.25)
    assert read_wav(io.BytesIO(wav_bytes(pcm, 8000))).sample_rate == 8000


def test_stereo_wav_is_mixed_down() -> None:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(int16_to_pcm16([100, 300, -50, -150]))
    buffer.seek(0)
    assert pcm16_to_int16(read_wav(buffer).pcm16).tolist() == [200, -100]


def test_unsupported_wav_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "eight_bit.wav"
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(8000)
        wav.writeframes(bytes(80))
    with pytest.raises(ValueError, match=r"eight_bit\.wav: WAV has 8-bit samples"):
        read_wav(path)
    (tmp_path / "junk.wav").write_bytes(b"not a wav file")
    with pytest.raises(ValueError, match=r"junk\.wav: not a readable PCM WAV file"):
        read_wav(tmp_path / "junk.wav")
