"""The WebRTC media path of `voice.rtc_media`: our Opus packets and the caller's decoding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("aiortc")

from aiortc.codecs.opus import OpusDecoder, OpusEncoder
from aiortc.jitterbuffer import JitterFrame

from tests.fakes.deepgram import piper_speech
from voicehub.voice.audio import resample
from voicehub.voice.rtc_media import (
    BROWSER_APPLICATION,
    BROWSER_COMPLEXITY,
    OpusPackets,
    PcmDecoder,
)

SPEECH = "the analysts are looking into heat pumps now"


def _decoded(packets: list[object]) -> np.ndarray:
    """What a browser hears: aiortc's decoder on the packets as its sender packs them."""
    sender, decoder = OpusEncoder(), OpusDecoder()
    out: list[np.ndarray] = []
    for packet in packets:
        payloads, timestamp = sender.pack(packet)  # type: ignore[arg-type]
        for frame in decoder.decode(JitterFrame(data=payloads[0], timestamp=timestamp)):
            out.append(frame.to_ndarray().reshape(-1, 2)[:, 0])
    return np.concatenate(out)


def test_agent_audio_is_opus_at_the_session_rate_and_sounds_like_it() -> None:
    pcm = piper_speech(SPEECH, 16000)
    pcm = pcm[: len(pcm) // 640 * 640]
    encoder = OpusPackets(16000)
    packets = [encoder.packet(pcm[at : at + 640]) for at in range(0, len(pcm), 640)]
    assert all(p is not None for p in packets)
    # RTP time goes on the 48 kHz clock, 960 a packet, as aiortc packs our 16 kHz pts
    stamps = [OpusEncoder().pack(p)[1] for p in packets[:3]]  # type: ignore[arg-type]
    assert [b - a for a, b in itertools.pairwise(stamps)] == [960, 960]
    heard = _decoded(packets).astype(np.float64)
    sent = resample(np.frombuffer(pcm, dtype="<i2"), 16000, 48000).astype(np.float64)
    # the codec's delay is a few ms: the best alignment is close to the original
    best = max(
        float(np.corrcoef(sent[: len(sent) - lag], heard[lag : len(sent)])[0, 1])
        for lag in range(0, 960, 24)
    )
    assert best > 0.98, best  # CELT keeps the waveform (SILK at complexity 1: about 0.93)


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_packets_carry_the_rtp_timestamps_aiortc_gave_the_session_rate_pts(rate: int) -> None:
    """The pts on the 48 kHz RTP clock: the same timestamps aiortc derived before from pts
    at the session rate, and its packer no longer converts them."""
    from fractions import Fraction

    encoder = OpusPackets(rate)
    samples = rate // 50
    packets = [encoder.packet(None if n % 3 else bytes(samples * 2)) for n in range(9)]
    sender = OpusEncoder()
    for number, packet in enumerate(packets):
        if packet is None:
            continue
        assert packet.time_base == Fraction(1, 48000)
        old = int(number * samples * Fraction(1, rate) / Fraction(1, 48000))
        assert sender.pack(packet)[1] == old == number * 960


def _modes(packets: list[object]) -> set[str]:
    """Opus' coding mode of each packet, from its TOC byte (RFC 6716, 3.1)."""
    configs = {bytes(packet)[0] >> 3 for packet in packets}  # type: ignore[call-overload]
    return {"silk" if c < 12 else "hybrid" if c < 16 else "celt" for c in configs}


def test_agent_audio_is_celt_only_and_a_browser_microphone_is_not() -> None:
    pcm = piper_speech(SPEECH, 16000)
    pcm = pcm[: len(pcm) // 640 * 640]
    agent = OpusPackets(16000)
    mic = OpusPackets(16000, BROWSER_COMPLEXITY, BROWSER_APPLICATION)
    chunks = [pcm[at : at + 640] for at in range(0, len(pcm), 640)]
    assert _modes([agent.packet(chunk) for chunk in chunks]) == {"celt"}
    assert _modes([p for p in (mic.packet(chunk) for chunk in chunks) if p]) <= {"silk", "hybrid"}


def test_silence_is_one_packet_sent_again_and_decodes_quiet() -> None:
    encoder = OpusPackets(16000)
    first, second = encoder.packet(None), encoder.packet(None)
    assert bytes(first) == bytes(second) and second.pts - first.pts == 960  # the RTP clock
    quiet = _decoded([first, second])
    assert np.abs(quiet).max() < 50


def test_caller_stereo_48k_becomes_session_mono_in_place() -> None:
    """Both channels averaged (the integer mean the old path took), then 48 -> 16 kHz."""
    import av

    tone = (np.sin(np.arange(960) / 48000 * 2 * np.pi * 440) * 8000).astype(np.int16)
    stereo = np.stack([tone, tone // 2], axis=1).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(stereo, format="s16", layout="stereo")
    frame.sample_rate = 48000
    decoder = PcmDecoder(16000)
    out = b"".join(decoder.decode(frame) for _ in range(10))
    mono = np.frombuffer(out, dtype="<i2")
    assert 3000 <= len(mono) <= 3200  # 10 x 20 ms at 16 kHz, less the resampler's delay
    expected = (tone.astype(np.int32) + tone // 2) >> 1
    assert abs(np.abs(mono[-300:]).max() - np.abs(expected).max()) < 400
    with pytest.raises(ValueError, match="s16"):
        decoder.decode(av.AudioFrame(format="fltp", layout="mono", samples=960))


def test_caller_stereo_mix_is_the_integer_mean_of_the_channels_exactly() -> None:
    import av

    rng = np.random.default_rng(7)
    stereo = rng.integers(-32768, 32768, size=(960, 2), dtype=np.int16)
    frame = av.AudioFrame.from_ndarray(stereo.reshape(1, -1), format="s16", layout="stereo")
    frame.sample_rate = 16000  # no resampling: the mix alone
    mono = np.frombuffer(PcmDecoder(16000).decode(frame), dtype="<i2")
    expected = (stereo[:, 0].astype(np.int32) + stereo[:, 1]) >> 1
    assert np.array_equal(mono, expected.astype(np.int16))
