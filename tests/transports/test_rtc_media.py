"""The WebRTC media path of `transports.rtc_media`: our Opus packets and the caller's decoding."""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
import pytest

pytest.importorskip("aiortc")

from aiortc.codecs.opus import OpusDecoder, OpusEncoder
from aiortc.jitterbuffer import JitterFrame

from tests.support.speech import spoken
from voicehub.errors import VoicehubError
from voicehub.transports import rtc_media
from voicehub.transports.libopus import LibOpusEncoder, OpusError, load_libopus, open_libopus
from voicehub.transports.rtc_media import (
    BROWSER_APPLICATION,
    BROWSER_COMPLEXITY,
    OpusPackets,
    PcmDecoder,
)
from voicehub.voice.audio import resample

SPEECH = "the analysts are looking into heat pumps now"
Via = Literal["libopus", "pyav"]


def _decoded(packets: list[object]) -> np.ndarray:
    """What a browser hears: aiortc's decoder on the packets as its sender packs them."""
    sender, decoder = OpusEncoder(), OpusDecoder()
    out: list[np.ndarray] = []
    for packet in packets:
        payloads, timestamp = sender.pack(packet)  # type: ignore[arg-type]
        for frame in decoder.decode(JitterFrame(data=payloads[0], timestamp=timestamp)):
            out.append(frame.to_ndarray().reshape(-1, 2)[:, 0])
    return np.concatenate(out)


@pytest.fixture(scope="module", autouse=True)
def libopus_installed() -> None:
    assert load_libopus() is not None, "no libopus: as root, apt-get install libopus0"


VIA = ["libopus", "pyav"]


@pytest.mark.parametrize("via", VIA)
def test_agent_audio_is_opus_at_the_session_rate_and_sounds_like_it(via: Via) -> None:
    pcm = spoken(SPEECH, rate=16000)
    pcm = pcm[: len(pcm) // 640 * 640]
    encoder = OpusPackets(16000, via=via)
    assert encoder.via == via
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


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
def test_packets_carry_the_rtp_timestamps_aiortc_gave_the_session_rate_pts(
    rate: int, via: Via
) -> None:
    """The pts on the 48 kHz RTP clock: the same timestamps aiortc derived before from pts
    at the session rate, and its packer no longer converts them."""
    from fractions import Fraction

    encoder = OpusPackets(rate, via=via)
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


@pytest.mark.parametrize("via", VIA)
def test_agent_audio_is_celt_only_and_a_browser_microphone_is_not(via: Via) -> None:
    pcm = spoken(SPEECH, rate=16000)
    pcm = pcm[: len(pcm) // 640 * 640]
    agent = OpusPackets(16000, via=via)
    mic = OpusPackets(16000, BROWSER_COMPLEXITY, BROWSER_APPLICATION, via=via)
    chunks = [pcm[at : at + 640] for at in range(0, len(pcm), 640)]
    assert _modes([agent.packet(chunk) for chunk in chunks]) == {"celt"}
    assert _modes([p for p in (mic.packet(chunk) for chunk in chunks) if p]) <= {"silk", "hybrid"}


@pytest.mark.parametrize("via", VIA)
def test_silence_is_one_packet_sent_again_and_decodes_quiet(via: Via) -> None:
    encoder = OpusPackets(16000, via=via)
    first, second = encoder.packet(None), encoder.packet(None)
    assert bytes(first) == bytes(second) and second.pts - first.pts == 960  # the RTP clock
    quiet = _decoded([first, second])
    assert np.abs(quiet).max() < 50


def test_libopus_and_pyav_packets_decode_to_the_same_speech() -> None:
    """The two encoders are the same codec and settings: what a browser hears of each
    matches sample for sample, within the codec's noise."""
    pcm = spoken(SPEECH, rate=16000)
    chunks = [pcm[at : at + 640] for at in range(0, len(pcm) // 640 * 640, 640)]
    heard = {}
    for via in ("libopus", "pyav"):
        encoder = OpusPackets(16000, via=via)  # type: ignore[arg-type]
        heard[via] = _decoded([p for p in (encoder.packet(c) for c in chunks) if p is not None])
    # PyAV's encoder delays by its look-ahead (packets withheld at the start): align to it
    size = min(len(heard["libopus"]), len(heard["pyav"])) - 960
    best = max(
        float(np.corrcoef(heard["libopus"][lag : lag + size], heard["pyav"][:size])[0, 1])
        for lag in range(0, 961, 24)
    )
    assert best > 0.98, best


def test_auto_falls_back_to_pyav_and_asking_for_libopus_without_it_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert OpusPackets(16000).via == "libopus"  # this machine has it
    monkeypatch.setattr(rtc_media, "load_libopus", lambda: None)
    assert OpusPackets(16000).via == "pyav"
    with pytest.raises(VoicehubError, match="libopus0"):
        OpusPackets(16000, via="libopus")


def test_a_library_that_is_not_libopus_is_not_taken_for_it() -> None:
    import ctypes.util

    assert open_libopus(str(ctypes.util.find_library("c"))) is None  # no opus_* functions
    assert open_libopus("/nonexistent/libopus.so.0") is None


def test_libopus_refusals_name_what_is_wrong() -> None:
    lib = load_libopus()
    with pytest.raises(OpusError, match=r"opus_encoder_create\(44100 Hz\): invalid argument"):
        LibOpusEncoder(lib, 44100, 882, "lowdelay", 0, 32000)
    with pytest.raises(OpusError, match=r"opus_encoder_ctl\(complexity=11\): invalid argument"):
        LibOpusEncoder(lib, 16000, 320, "lowdelay", 11, 32000)
    with pytest.raises(ValueError, match="unknown Opus application 'music'"):
        LibOpusEncoder(lib, 16000, 320, "music", 0, 32000)
    encoder = LibOpusEncoder(lib, 16000, 320, "lowdelay", 0, 32000)
    with pytest.raises(ValueError, match="640 bytes here, got 638"):
        encoder.encode(bytes(638))
    encoder.close()
    with pytest.raises(OpusError, match="closed"):
        encoder.encode(bytes(640))


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
