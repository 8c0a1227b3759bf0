"""The relay's streaming resampler keeps speech-band audio intact both ways."""

from __future__ import annotations

import numpy as np
import pytest

from voicehub.voice.realtime.pcm_resampler import PcmResampler


def tone(hz: float, rate: int, seconds: float) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (8000 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def stream(resampler: PcmResampler, samples: np.ndarray, chunk: int) -> np.ndarray:
    pcm = samples.tobytes()
    out = b"".join(resampler.push(bytearray(pcm[i : i + chunk])) for i in range(0, len(pcm), chunk))
    return np.frombuffer(out, dtype="<i2").astype(np.float64)


@pytest.mark.parametrize("hz", [300.0, 1000.0, 3400.0, 6500.0])
def test_a_tone_keeps_its_level_and_pitch_through_16_to_24_and_back(hz: float) -> None:
    up, down = PcmResampler(16000, 24000), PcmResampler(24000, 16000)
    at_24k = stream(up, tone(hz, 16000, 1.0), 1920)  # 60 ms appends
    back = stream(down, at_24k.astype(np.int16), 960)  # 20 ms model deltas
    for signal, rate in ((at_24k, 24000), (back, 16000)):
        steady = signal[len(signal) // 4 : 3 * len(signal) // 4]  # clear of the edges
        rms = float(np.sqrt(np.mean(steady**2)))
        assert rms == pytest.approx(8000 / np.sqrt(2), rel=0.03)
        spectrum = np.abs(np.fft.rfft(steady * np.hanning(len(steady))))
        peak_hz = float(np.argmax(spectrum)) * rate / len(steady)
        assert peak_hz == pytest.approx(hz, abs=rate / len(steady) * 1.5)


def test_same_rates_pass_through_as_bytes() -> None:
    same = PcmResampler(24000, 24000)
    chunk = bytearray(b"\x01\x00" * 480)
    out = same.push(chunk)
    chunk.clear()  # the caller may reuse its buffer at once
    assert isinstance(out, bytes) and out == b"\x01\x00" * 480
