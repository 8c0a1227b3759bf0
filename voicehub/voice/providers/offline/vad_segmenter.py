"""Turn per-frame speech decisions into speech segments: a sans-I/O state machine.

The same hysteresis as livekit's Silero stream (start after ``min_speech_duration`` of
speech, end after ``min_silence_duration`` of silence), with a pre-roll so the first
phoneme is not clipped. It knows nothing about livekit or any detector, so the lean
hand-written call loop and the livekit VAD plugin share it.
"""

from __future__ import annotations

from collections import deque
from enum import Enum


class Transition(Enum):
    """What a frame changed."""

    NONE = 0
    STARTED = 1
    ENDED = 2


class SpeechSegmenter:
    """Feed frames with a speech/non-speech decision; get segment boundaries and audio.

    Durations follow livekit's ``VADEvent`` fields: ``speech_duration`` and
    ``silence_duration`` are the public (hysteresis-smoothed) ones, ``raw_speech`` and
    ``raw_silence`` count the current run of raw decisions. Counting is in samples, so
    thresholds hold exactly (no float drift over a long call).
    """

    def __init__(
        self,
        sample_rate: int,
        *,
        min_speech_duration: float = 0.06,
        min_silence_duration: float = 0.35,
        prefix_padding_duration: float = 0.3,
        max_buffered_speech: float = 60.0,
        sample_width: int = 2,
    ) -> None:
        self.sample_rate = sample_rate
        self._width = sample_width
        self._min_speech = round(min_speech_duration * sample_rate)
        self._min_silence = round(min_silence_duration * sample_rate)
        self._prefix_bytes = round(prefix_padding_duration * sample_rate) * sample_width
        self._max_bytes = round(max_buffered_speech * sample_rate) * sample_width
        self._buffer: deque[bytes] = deque()
        self.reset()

    def reset(self) -> None:
        """Forget everything: the next frame starts a fresh segment (a VAD flush)."""
        self.speaking = False
        self.samples_processed = 0
        self._speech = 0  # public speech samples of the current segment
        self._silence = 0  # public silence samples since the last segment
        self._raw_speech = 0
        self._raw_silence = 0
        self._buffer.clear()
        self._buffered = 0
        self._ended = False

    @property
    def elapsed(self) -> float:
        """Seconds of audio processed since the last reset."""
        return self.samples_processed / self.sample_rate

    @property
    def speech_duration(self) -> float:
        """Seconds of speech in the current (or just ended) segment."""
        return self._speech / self.sample_rate

    @property
    def silence_duration(self) -> float:
        """Seconds of silence since the last segment ended."""
        return self._silence / self.sample_rate

    @property
    def raw_speech(self) -> float:
        """Seconds of the current run of speech decisions."""
        return self._raw_speech / self.sample_rate

    @property
    def raw_silence(self) -> float:
        """Seconds of the current run of silence decisions."""
        return self._raw_silence / self.sample_rate

    def process(self, frame: bytes, is_speech: bool) -> Transition:
        """Account for one frame (any length) and its decision."""
        if self._ended:  # the previous frame closed a segment its caller has read by now
            self._ended = False
            self._speech = 0
            self._trim_to_prefix()
        samples = len(frame) // self._width
        self.samples_processed += samples
        if self._buffered < self._max_bytes:  # beyond the cap the segment is truncated
            self._buffer.append(frame)
            self._buffered += len(frame)
        if self.speaking:
            self._speech += samples
        else:
            self._silence += samples

        if is_speech:
            self._raw_speech += samples
            self._raw_silence = 0
            if not self.speaking and self._raw_speech >= self._min_speech:
                self.speaking = True
                self._silence = 0
                self._speech = self._raw_speech
                return Transition.STARTED
            return Transition.NONE

        self._raw_silence += samples
        self._raw_speech = 0
        if not self.speaking:
            self._trim_to_prefix()
            return Transition.NONE
        if self._raw_silence >= self._min_silence:
            self.speaking = False
            self._silence = self._raw_silence
            self._speech = max(0, self._speech - self._raw_silence)
            self._ended = True
            return Transition.ENDED
        return Transition.NONE

    def speech_audio(self) -> bytes:
        """The pre-roll and speech so far; after ENDED, the whole segment with its tail.

        Call it right after the transition you care about: the next frame after ENDED
        trims the buffer back to the pre-roll.
        """
        return b"".join(self._buffer)

    def _trim_to_prefix(self) -> None:
        while self._buffer and self._buffered - len(self._buffer[0]) >= self._prefix_bytes:
            self._buffered -= len(self._buffer.popleft())
