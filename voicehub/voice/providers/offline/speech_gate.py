"""A cheap per-frame speech decision for a recognizer's own use: :class:`SpeechGate`.

WebRTC's GMM detector (`webrtcvad`, about 2 us per 20 ms frame) on 20 ms frames at the
audio's own rate when it takes it (8, 16, 32 or 48 kHz: phone audio stays 8 kHz, which
Whisper decodes with a beam), else resampled to 16 kHz. It is no turn detector (the
session's VAD is): it only tells a recognizer where speech is, to cut the audio it decodes
(`utterance_window`). Its false alarms in noise cost a wider window, not a wrong turn.
"""

from __future__ import annotations

from voicehub.voice.audio import FrameSplitter, Resampler, int16_to_pcm16, pcm16_to_int16
from voicehub.voice.providers import vendor_import

__all__ = ["GATE_MODE", "SpeechGate"]

_RATES = (8000, 16000, 32000, 48000)
_FALLBACK_RATE = 16000
GATE_MODE = 1
"""webrtcvad's aggressiveness (0-3): 1 keeps soft word ends (the window's `tail` covers
what it drops) and ignores steady hum."""


class SpeechGate:
    """Cuts PCM16 audio at `sample_rate` into 20 ms frames and decides each: `push` returns
    (frame, speech) pairs, the frames at `rate` (the input's, or 16 kHz when webrtcvad does
    not take the input's)."""

    def __init__(self, sample_rate: int, mode: int = GATE_MODE) -> None:
        with vendor_import("webrtcvad-wheels"):
            import webrtcvad

        self.input_rate = sample_rate
        self.rate = sample_rate if sample_rate in _RATES else _FALLBACK_RATE
        self._resampler = None if self.rate == sample_rate else Resampler(sample_rate, self.rate)
        self._frames = FrameSplitter(self.rate, 20)
        self._detector = webrtcvad.Vad(mode)

    def push(self, pcm16: bytes) -> list[tuple[bytes, bool]]:
        """Decisions for every whole 20 ms frame `pcm16` completes."""
        if self._resampler is not None:
            pcm16 = int16_to_pcm16(self._resampler.push(pcm16_to_int16(pcm16)))
        detector, rate = self._detector, self.rate
        return [(frame, detector.is_speech(frame, rate)) for frame in self._frames.push(pcm16)]

    def decide_all(self, pcm16: bytes) -> tuple[list[bytes], list[bool]]:
        """A whole recording's frames and decisions (the last partial frame is dropped)."""
        pairs = self.push(pcm16)
        return [frame for frame, _ in pairs], [speech for _, speech in pairs]
