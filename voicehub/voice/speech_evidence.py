"""Per-frame speech evidence from the caller's audio level, available the instant a frame
arrives.

The VAD's debounced start of speech comes 60-200 ms after the first voiced frame (its
minimum speech duration, plus Silero's batching). Delivery needs to know sooner: a result must
not start over a caller who began a frame ago, and must stop the frame the caller starts.
So every caller frame's RMS level is measured here against an adaptive noise floor: a
frame is speech-like when it is louder than `min_rms` and `above_floor` times the floor.
The floor follows the quietest frames down at once and rises slowly (`floor_rise` per
frame), so steady line noise stops counting within seconds while
the dips between a talker's syllables keep it low.

The level is `math.hypot` over the frame's samples (within an ulp of the exact integer
RMS), not numpy: in a busy event loop numpy's per-call machinery is cold at every frame and
costs more than the whole of `hypot`, and a float dot product through BLAS releases the GIL,
so the frame waits behind any busy thread to get it back.

Erring towards "voiced" costs little: a noise burst only holds a result for the next gap or
cuts a result that is then offered again; it never loses one.
"""

from __future__ import annotations

import array
import math
import sys

from voicehub.voice.audio import frame_bytes

__all__ = ["SpeechEvidence"]

_BIG_ENDIAN = sys.byteorder == "big"


class SpeechEvidence:
    """Counts the speech-like 20 ms frames of caller PCM16 at `sample_rate`."""

    __slots__ = ("_above_floor", "_floor", "_floor_rise", "_frame", "_min_rms", "_rest")

    def __init__(
        self,
        sample_rate: int,
        *,
        min_rms: float = 260.0,  # about -42 dBFS
        above_floor: float = 4.0,  # 12 dB over the noise floor
        floor_rise: float = 1.015,  # +0.13 dB a frame: about 1.9 s to rise 12 dB
    ) -> None:
        self._frame = frame_bytes(sample_rate)
        self._min_rms = min_rms
        self._above_floor = above_floor
        self._floor_rise = floor_rise
        self._floor = min_rms / above_floor
        self._rest = b""  # a partial frame, completed by the next chunk

    def voiced_frames(self, pcm16: bytes) -> int:
        """How many whole frames of `pcm16` (after any partial frame left before) are
        speech-like; updates the noise floor."""
        if len(pcm16) == self._frame and not self._rest:  # one whole frame: the usual case
            return self._voiced(_rms(pcm16))
        data = self._rest + pcm16 if self._rest else pcm16
        whole = len(data) - len(data) % self._frame
        self._rest = data[whole:]
        view = memoryview(data)
        return sum(
            self._voiced(_rms(view[start : start + self._frame]))
            for start in range(0, whole, self._frame)
        )

    def _voiced(self, level: float) -> int:
        """1 if a frame at RMS `level` is speech-like, else 0; moves the noise floor."""
        floor = self._floor
        voiced = level > max(self._min_rms, floor * self._above_floor)
        # never stuck at 0 after digital silence: rise from at least 1
        self._floor = level if level < floor else max(floor, 1.0) * self._floor_rise
        return 1 if voiced else 0


def _rms(frame: bytes | memoryview) -> float:
    """RMS of one whole frame of PCM16 (little-endian, as voicehub's audio is everywhere)."""
    samples: memoryview | array.array[int] = memoryview(frame).cast("h")
    if _BIG_ENDIAN:
        samples = array.array("h", frame)
        samples.byteswap()
    return math.hypot(*samples) / math.sqrt(len(samples))
