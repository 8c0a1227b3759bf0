"""Mono PCM16 WAV files: read (stereo is mixed down), write, and build in memory."""

from __future__ import annotations

import io
import wave
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np

from voicehub.voice.audio.pcm import int16_to_pcm16, pcm16_to_int16


class PcmAudio(NamedTuple):
    """Mono PCM16 audio with its sample rate."""

    pcm16: bytes
    sample_rate: int

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return len(self.pcm16) / 2 / self.sample_rate


def read_wav(source: str | Path | BinaryIO) -> PcmAudio:
    """Read a mono 16-bit WAV file (stereo is mixed down)."""
    name = str(source) if isinstance(source, str | Path) else getattr(source, "name", "<stream>")
    try:
        with wave.open(source if not isinstance(source, Path) else str(source), "rb") as wav:
            channels, width, rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
            raw = wav.readframes(wav.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"{name}: not a readable PCM WAV file ({exc})") from exc
    if width != 2:
        raise ValueError(f"{name}: WAV has {8 * width}-bit samples; expected 16-bit PCM")
    samples = pcm16_to_int16(raw)
    if channels > 1:
        mixed = samples.reshape(-1, channels).astype(np.int32).mean(axis=1)
        samples = np.rint(mixed).astype(np.int16)
    return PcmAudio(int16_to_pcm16(samples), rate)


def write_wav(target: str | Path | BinaryIO, pcm16: bytes, sample_rate: int) -> None:
    """Write mono PCM16 to a WAV file."""
    pcm16_to_int16(pcm16)  # validate before creating the file
    with wave.open(target if not isinstance(target, Path) else str(target), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm16)


def wav_bytes(pcm16: bytes, sample_rate: int) -> bytes:
    """Return a complete WAV file in memory."""
    buffer = io.BytesIO()
    write_wav(buffer, pcm16, sample_rate)
    return buffer.getvalue()
