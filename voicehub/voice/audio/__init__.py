"""Audio utilities on numpy, one module per concept.

- :mod:`.pcm`: PCM16 bytes <-> int16 and float arrays
- :mod:`.g711`: mu-law and A-law, bit-exact with audioop
- :mod:`.resample`: streaming sample-rate conversion
- :mod:`.framing`: fixed 20 ms frames
- :mod:`.wav`: WAV files
- :mod:`.level`: RMS, dBFS, band energy

Everything is pure and synchronous so transports, providers and tests share one
implementation. Sample data is mono PCM16 little-endian unless a name says otherwise. The
public names are re-exported here, so ``from voicehub.voice.audio import X`` works for all.
"""

from __future__ import annotations

from voicehub.voice.audio.framing import FRAME_MS, FrameSplitter, check_frame, frame_bytes
from voicehub.voice.audio.g711 import alaw2lin, lin2alaw, lin2ulaw, ulaw2lin
from voicehub.voice.audio.level import dbfs, energy_above, rms
from voicehub.voice.audio.pcm import (
    Float32Array,
    Int16Array,
    float32_to_pcm16,
    float_to_int16,
    int16_to_pcm16,
    pcm16_to_float32,
    pcm16_to_int16,
)
from voicehub.voice.audio.resample import Resampler, resample, resample_pcm16
from voicehub.voice.audio.wav import PcmAudio, read_wav, wav_bytes, write_wav

__all__ = [
    "FRAME_MS",
    "Float32Array",
    "FrameSplitter",
    "Int16Array",
    "PcmAudio",
    "Resampler",
    "alaw2lin",
    "check_frame",
    "dbfs",
    "energy_above",
    "float32_to_pcm16",
    "float_to_int16",
    "frame_bytes",
    "int16_to_pcm16",
    "lin2alaw",
    "lin2ulaw",
    "pcm16_to_float32",
    "pcm16_to_int16",
    "read_wav",
    "resample",
    "resample_pcm16",
    "rms",
    "ulaw2lin",
    "wav_bytes",
    "write_wav",
]
