"""Audio between aiortc tracks and the PCM16 the rest of voicehub speaks.

Both ends of a WebRTC call use these: the server's transport and the synthetic caller.

- `paced_track(queue, ...)` is an outbound aiortc audio track fed by a `PlayoutQueue`: one
  20 ms packet per tick on the event loop's clock (silence when nothing is queued, so the
  far end's jitter buffer keeps running), reporting marks as they fall due. It hands aiortc
  Opus packets it encoded itself (`OpusPackets`), not audio frames: aiortc packs a packet
  inline, where a frame would cost a hop to its encoder thread per 20 ms, an audio-level
  pass, and a resampling to 48 kHz stereo before the encoder.
- `PcmDecoder` turns received frames (Opus decodes to 48 kHz stereo; G.711 to 8 kHz mono)
  into PCM16 mono at the rate the caller of it wants (soxr when installed).

aiortc is imported lazily: without the `webrtc` extra nothing here loads it.
"""

from __future__ import annotations

import asyncio
import fractions
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from voicehub.errors import VoicehubError
from voicehub.transports.libopus import LibOpusEncoder, load_libopus
from voicehub.voice.audio import FRAME_MS, int16_to_pcm16
from voicehub.voice.audio.playout import PlayoutQueue
from voicehub.voice.realtime.pcm_resampler import PcmResampler

__all__ = [
    "BROWSER_APPLICATION",
    "BROWSER_COMPLEXITY",
    "OPUS_APPLICATION",
    "OPUS_COMPLEXITY",
    "OpusPackets",
    "PcmDecoder",
    "import_aiortc",
    "paced_track",
]

OPUS_APPLICATION = "lowdelay"
"""libopus application of agent audio: "restricted low delay", Opus' CELT mode alone (no
SILK speech coder, no mode switching). For mono speech at about 32 kb/s it is the cheapest
to encode, decodes closest to what was sent and has the shortest look-ahead; SILK earns its
place below about 20 kb/s or on a lossy uplink, and the agent's voice is neither."""
OPUS_COMPLEXITY = 0
"""libopus complexity (0-10) of agent audio: the lowest, since the encoder is most of the
transport's CPU and 32 kb/s of mono speech leaves bits to spare."""
# soxr's low quality for the caller's audio: 6 ms of delay where its high quality adds 21
# (before VAD and STT, on every turn), for a passband that still holds telephone speech
_CALLER_QUALITY = "LQ"
# a browser's microphone (the synthetic caller's): libopus' defaults for speech
BROWSER_APPLICATION, BROWSER_COMPLEXITY = "voip", 10
OPUS_BITRATE = 32000  # mono wideband speech; aiortc's own encoder spends 96 kb/s on stereo

_MAX_LATE = 0.5  # seconds behind schedule before the pacer gives up catching up
# Opus' RTP clock (RFC 7587), whatever the encoded rate: packets carry their pts on it, so
# aiortc's packer has no time base to convert (a `Fraction` product per packet)
RTP_CLOCK = 48000
_RTP_TIME_BASE = fractions.Fraction(1, RTP_CLOCK)


def import_aiortc() -> Any:
    """The aiortc module, or a clear error naming the extra to install."""
    try:
        import aiortc
    except ImportError:
        raise VoicehubError("WebRTC calls need aiortc: pip install 'voicehub[webrtc]'") from None
    return aiortc


class OpusPackets:
    """PCM16 mono 20 ms frames at `rate` in, Opus `av.Packet`s out, their pts on the RTP
    clock (48 kHz).

    libopus takes 8, 12, 16, 24 and 48 kHz as they are: the session's audio is never
    resampled on its way out. Silence is one packet encoded once and sent again (a quiet
    call costs no encoding). `via`: "libopus" encodes through libopus' own API
    (`voice.libopus`, half the CPU), "pyav" through PyAV's codec, "auto" the first where the
    system has libopus (`self.via` says which)."""

    def __init__(
        self,
        rate: int,
        complexity: int = OPUS_COMPLEXITY,
        application: str = OPUS_APPLICATION,
        *,
        via: Literal["auto", "libopus", "pyav"] = "auto",
    ) -> None:
        import av

        self._av = av
        self.rate = rate
        self.samples = rate * FRAME_MS // 1000
        self.time_base = fractions.Fraction(1, rate)
        self._application = application
        lib = load_libopus() if via != "pyav" else None
        if via == "libopus" and lib is None:
            raise VoicehubError("no usable libopus here (Linux, Debian's libopus0)")
        self.via = "libopus" if lib is not None else "pyav"
        self._encode = self._encoder(lib, complexity)
        self._pts = 0
        quiet, encoded = bytes(self.samples * 2), b""
        silent = self._encoder(lib, complexity)
        for _ in range(4):  # past the encoder's look-ahead: a steady silent packet
            encoded = silent(quiet) or encoded
        self._silence = encoded

    def _encoder(self, lib: Any | None, complexity: int) -> Callable[[bytes], bytes | None]:
        """A fresh encoder: a 20 ms frame in, its packet out (None: still filling PyAV's
        look-ahead)."""
        if lib is not None:
            encoder = LibOpusEncoder(
                lib, self.rate, self.samples, self._application, complexity, OPUS_BITRATE
            )
            return encoder.encode
        codec = self._av.CodecContext.create("libopus", "w")
        codec.format = "s16"
        codec.layout = "mono"
        codec.sample_rate = self.rate
        codec.time_base = self.time_base
        codec.bit_rate = OPUS_BITRATE
        codec.options = {"application": self._application, "compression_level": str(complexity)}
        pts = 0

        def encode(pcm16: bytes) -> bytes | None:
            nonlocal pts
            frame = self._av.AudioFrame(format="s16", layout="mono", samples=self.samples)
            frame.planes[0].update(pcm16)
            frame.sample_rate = self.rate
            frame.pts = pts
            frame.time_base = self.time_base
            pts += self.samples
            packets = codec.encode(frame)
            return bytes(packets[-1]) if packets else None

        return encode

    def packet(self, pcm16: bytes | None) -> Any:
        """The next 20 ms as one packet: `pcm16` encoded, or the silent packet for None.
        None while the encoder still fills its look-ahead (aiortc skips the tick)."""
        pts = self._pts
        self._pts += self.samples
        if pcm16 is None:
            data = self._silence
        else:
            encoded = self._encode(pcm16)
            if encoded is None:
                return None
            data = encoded
        packet = self._av.Packet(data)
        packet.pts = pts * RTP_CLOCK // self.rate
        packet.time_base = _RTP_TIME_BASE
        return packet


def paced_track(
    queue: PlayoutQueue,
    *,
    on_marks: Callable[[tuple[str, ...], int], None],
    on_audio: Callable[[], None] | None = None,
    complexity: int = OPUS_COMPLEXITY,
    application: str = OPUS_APPLICATION,
) -> Any:
    """An aiortc `MediaStreamTrack` (kind "audio") playing `queue` in real time, as Opus
    packets (`OpusPackets` at `complexity` and `application`).

    `on_marks` gets the marks whose audio has just been handed to the encoder, and where that
    audio ends on the track: milliseconds from the track's first tick, the clock its RTP
    timestamps count (a receiver's frame `pts` counts it too, from its first packet);
    `on_audio` is called for each frame that carried queued audio (not silence).
    """
    aiortc = import_aiortc()
    packets = OpusPackets(queue.sample_rate, complexity, application)

    track_base: Any = aiortc.MediaStreamTrack

    class PacedTrack(track_base):  # type: ignore[misc]
        kind = "audio"

        def __init__(self) -> None:
            super().__init__()
            self._next_at: float | None = None
            self._sent_ms = 0  # every tick advances the RTP clock, skipped or not

        async def recv(self) -> Any:
            while True:
                if self.readyState != "live":
                    raise aiortc.mediastreams.MediaStreamError
                loop = asyncio.get_running_loop()
                if self._next_at is None:
                    self._next_at = loop.time()
                delay = self._next_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif delay < -_MAX_LATE:  # the loop stalled: resume the clock, do not burst
                    self._next_at = loop.time()
                self._next_at += FRAME_MS / 1000
                self._sent_ms += FRAME_MS
                tick = queue.tick()
                if tick.marks:
                    on_marks(tick.marks, self._sent_ms)
                if tick.audio is not None and on_audio is not None:
                    on_audio()
                packet = packets.packet(tick.audio)
                if packet is not None:
                    return packet

    return PacedTrack()


class PcmDecoder:
    """Received audio frames -> PCM16 mono at `rate` (streaming: keeps resampler state)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._resampler: PcmResampler | None = None
        self._from_rate = 0

    def decode(self, frame: Any) -> bytes:
        """One av `AudioFrame` (packed s16, any rate and channel count) as PCM16 bytes."""
        if frame.format.name != "s16":
            raise ValueError(f"expected s16 audio frames, got {frame.format.name}")
        channels = frame.layout.nb_channels
        samples = np.frombuffer(frame.planes[0], dtype="<i2", count=frame.samples * channels)
        if channels == 1:
            mono = samples
        elif channels == 2:  # one widening, then strided columns: cheaper than a sum on an axis
            wide = samples.astype(np.int32)
            mono = ((wide[0::2] + wide[1::2]) >> 1).astype(np.int16)
        else:
            mono = (samples.reshape(-1, channels).astype(np.int32).sum(axis=1) // channels).astype(
                np.int16
            )
        if frame.sample_rate == self.rate:
            return int16_to_pcm16(mono)
        if self._resampler is None or frame.sample_rate != self._from_rate:
            self._resampler = PcmResampler(frame.sample_rate, self.rate, quality=_CALLER_QUALITY)
            self._from_rate = frame.sample_rate
        return self._resampler.push(mono.data)
