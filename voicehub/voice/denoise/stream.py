"""A call's caller audio through RNNoise, 20 ms frame in, 20 ms frame out.

RNNoise runs at 48 kHz on 10 ms frames (`rnnoise_library`); a call's audio is 8 kHz (phone),
16 kHz or 48 kHz. `RNNoiseFilter` resamples each frame up once, denoises every whole 10 ms of
48 kHz audio, resamples the result down once, and returns exactly as many samples as it was
given. What the resamplers and RNNoise hold back (about 12 ms at 8 and 16 kHz, 10 ms at
48 kHz) is made up with silence at the stream's start, once: after the first frame every
frame comes out whole and in step. The samples stay on the int16 scale throughout (RNNoise
takes floats on that scale); the output is rounded and clipped to int16 once, at the end.
"""

from __future__ import annotations

import numpy as np

from voicehub.voice.audio import Int16Array, Resampler, int16_to_pcm16, pcm16_to_int16
from voicehub.voice.denoise.rnnoise_library import RNNOISE_RATE, RNNoiseState

__all__ = ["RNNoiseFilter"]


class RNNoiseFilter:
    """One call's caller audio through RNNoise (see the module docstring).

    `process(pcm16)` takes PCM16 mono at `sample_rate` (any whole number of samples, a 20 ms
    frame in a call) and returns as many samples, denoised. `voice_probability` is RNNoise's
    judgement of the latest 10 ms. One filter per call; `close` frees RNNoise's state.
    """

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._state = RNNoiseState()
        self._block = self._state.frame_size
        self._up = Resampler(sample_rate, RNNOISE_RATE)
        self._down = Resampler(RNNOISE_RATE, sample_rate)
        self._pending = np.zeros(0, dtype=np.int16)  # 48 kHz input short of a whole block
        self._out = np.zeros(0, dtype=np.int16)  # denoised audio at the call's rate

    @property
    def voice_probability(self) -> float:
        return self._state.voice_probability

    def process(self, pcm16: bytes) -> bytes:
        """Denoise caller PCM16; returns the same number of bytes (see the class)."""
        samples = pcm16_to_int16(pcm16)
        wanted = len(samples)
        if not wanted:
            return b""
        pending = np.concatenate((self._pending, self._up.push(samples)))
        whole = len(pending) - len(pending) % self._block
        blocks = [
            self._state.process(pending[i : i + self._block]) for i in range(0, whole, self._block)
        ]
        self._pending = pending[whole:]
        if blocks:
            denoised = np.clip(np.rint(np.concatenate(blocks)), -32768, 32767).astype(np.int16)
            self._out = np.concatenate((self._out, self._down.push(denoised)))
        if len(self._out) < wanted:
            # The stream's start (or a rate whose blocks do not divide evenly): silence in
            # front makes the delay up, once, and every later frame comes out whole.
            pad = np.zeros(wanted - len(self._out), dtype=np.int16)
            self._out = np.concatenate((pad, self._out))
        frame: Int16Array = self._out[:wanted]
        self._out = self._out[wanted:]
        return int16_to_pcm16(frame)

    def close(self) -> None:
        self._state.close()
