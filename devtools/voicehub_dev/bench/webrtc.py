"""WebRTC figures: the CPU a call's audio costs in the WebRTC transport, per 20 ms frame,
side by side with the WebSocket transport in the same run.

What is timed, per 20 ms of audio each way (Piper speech, one call, frame by frame, best of
a few rounds since the machine may be shared):

- ``us_per_frame`` (WebRTC): caller audio as aiortc hands it over (Opus decoded to 48 kHz
  stereo by aiortc's decoder; the decode is timed too), mixed to mono, resampled to 16 kHz
  and cut into 20 ms frames; agent audio taken from the playout queue and Opus-encoded at
  16 kHz mono into a packet (`rtc_media.OpusPackets`), which aiortc's sender only packs.
  ``decode_us_per_frame`` is aiortc's Opus decode alone (not ours to change: its receiver
  decodes every packet), ``encode_us_per_frame`` the outbound packet alone, through
  libopus' own API where the system has it (``encoder`` says which), and
  ``encode_pyav_us_per_frame`` the same packets through PyAV's encoder, the fallback.
- ``realtime_24k_us_per_frame``: the same at a realtime desk's 24 kHz (caller audio
  resampled 48 -> 24 kHz, agent audio encoded at 24 kHz), where the relay then passes the
  audio through; at 16 kHz the relay would resample 16 <-> 24 kHz on top.
- ``websocket_us_per_frame``: the caller frame's size check, and the agent frame queued and
  pumped to a socket that only counts.
- ``calls_per_core``: 20 ms of CPU divided by the WebRTC figure: the calls one core could
  carry on transport work alone (the voice session's own cost comes on top).

Not timed: SRTP, RTP packetizing, ICE and SCTP (aiortc's, per packet), nor the kernel.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from voicehub.transports.rtc_media import OpusPackets, PcmDecoder
from voicehub.transports.websocket import WebSocketTransport, check_audio_message
from voicehub.voice.audio import FrameSplitter, int16_to_pcm16, resample
from voicehub.voice.audio.playout import PlayoutQueue
from voicehub.voice.events import FRAME_BYTES, SAMPLE_RATE
from voicehub.voice.realtime.config import MODEL_RATE as REALTIME_RATE

_OPUS_RATE = 48000


def _caller_packets(pcm16: bytes) -> list[Any]:
    """The speech as the Opus packets a browser would send (20 ms each)."""
    import av
    from aiortc.codecs.opus import OpusEncoder

    encoder = OpusEncoder()
    packets: list[Any] = []
    samples = np.frombuffer(pcm16, dtype="<i2")
    upsampled = resample(samples, SAMPLE_RATE, _OPUS_RATE)
    for start in range(0, len(upsampled) - 959, 960):
        frame = av.AudioFrame.from_ndarray(
            upsampled[start : start + 960].reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = _OPUS_RATE
        frame.pts = start
        payloads, timestamp = encoder.encode(frame)
        packets.extend((payload, timestamp) for payload in payloads)
    return packets


def _webrtc_round(packets: list[Any], agent: bytes, rate: int = SAMPLE_RATE) -> float:
    """Seconds of CPU for one call's audio both ways through the WebRTC media path, the
    call's PCM at `rate` (`agent` is at it)."""
    from aiortc.codecs.opus import OpusDecoder, OpusEncoder
    from aiortc.jitterbuffer import JitterFrame

    decoder, sender = OpusDecoder(), OpusEncoder()  # the sender only packs (as aiortc's)
    pcm, frames = PcmDecoder(rate), FrameSplitter(rate)
    queue = PlayoutQueue(rate)
    queue.put_audio(agent)
    outbound = OpusPackets(rate)
    started = time.process_time()
    for payload, timestamp in packets:
        for decoded in decoder.decode(JitterFrame(data=payload, timestamp=timestamp)):
            frames.push(pcm.decode(decoded))
        packet = outbound.packet(queue.tick().audio)
        if packet is not None:
            sender.pack(packet)
    return time.process_time() - started


def _parts(packets: list[Any], agent: bytes) -> tuple[float, float, float]:
    """Seconds of CPU of aiortc's decode alone, of the outbound packets alone, and of the
    same packets through PyAV's encoder (the fallback without libopus)."""
    from aiortc.codecs.opus import OpusDecoder
    from aiortc.jitterbuffer import JitterFrame

    decoder = OpusDecoder()
    started = time.process_time()
    for payload, timestamp in packets:
        decoder.decode(JitterFrame(data=payload, timestamp=timestamp))
    decode = time.process_time() - started
    encodes = []
    for outbound in (OpusPackets(SAMPLE_RATE), OpusPackets(SAMPLE_RATE, via="pyav")):
        started = time.process_time()
        for at in range(0, len(packets) * FRAME_BYTES, FRAME_BYTES):
            outbound.packet(agent[at : at + FRAME_BYTES] or bytes(FRAME_BYTES))
        encodes.append(time.process_time() - started)
    return decode, encodes[0], encodes[1]


class _CountingSocket:
    def __init__(self) -> None:
        self.sent = 0

    async def send_bytes(self, data: bytes) -> None:
        self.sent += len(data)

    async def send_text(self, data: str) -> None:
        self.sent += len(data)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        return None


async def _websocket_round(caller: bytes, agent: bytes) -> float:
    transport = WebSocketTransport()
    socket = _CountingSocket()
    pump = asyncio.create_task(transport.pump(socket))
    count = len(caller) // FRAME_BYTES
    started = time.process_time()
    for number in range(count):
        check_audio_message(FRAME_BYTES)
        start = number * FRAME_BYTES
        await transport.send_audio(agent[start : start + FRAME_BYTES])
        await asyncio.sleep(0)  # the pump sends it
    transport.close()
    await pump
    return time.process_time() - started


async def run(store: str = "sqlite", quick: bool = False) -> dict[str, Any]:
    """The `webrtc` section: a few seconds (needs the `webrtc` extra)."""
    del store
    from voicehub_dev.bench.audio import SPEECH_RATE, speech

    started = time.perf_counter()
    samples, _ = speech()
    caller = int16_to_pcm16(resample(samples, SPEECH_RATE, SAMPLE_RATE))
    caller = caller[: len(caller) // FRAME_BYTES * FRAME_BYTES]
    frames = len(caller) // FRAME_BYTES
    packets = _caller_packets(caller)
    rounds = 2 if quick else 5
    webrtc = min(_webrtc_round(packets, caller) for _ in range(rounds)) / len(packets)
    agent_24k = int16_to_pcm16(resample(samples, SPEECH_RATE, REALTIME_RATE))
    realtime = min(_webrtc_round(packets, agent_24k, REALTIME_RATE) for _ in range(rounds)) / len(
        packets
    )
    parts = [_parts(packets, caller) for _ in range(rounds)]
    decode = min(part[0] for part in parts) / len(packets)
    encode = min(part[1] for part in parts) / len(packets)
    encode_pyav = min(part[2] for part in parts) / len(packets)
    websocket = min([await _websocket_round(caller, caller) for _ in range(rounds)]) / frames
    us_per_frame = round(webrtc * 1e6, 1)
    figures = {
        "us_per_frame": us_per_frame,
        "realtime_24k_us_per_frame": round(realtime * 1e6, 1),
        "websocket_us_per_frame": round(websocket * 1e6, 1),
        "decode_us_per_frame": round(decode * 1e6, 1),
        "encode_us_per_frame": round(encode * 1e6, 1),
        "encoder": OpusPackets(SAMPLE_RATE).via,
        "encode_pyav_us_per_frame": round(encode_pyav * 1e6, 1),
        "calls_per_core": int(20_000 / us_per_frame),
        "frames": frames,
        "quick": quick,
        "section_seconds": round(time.perf_counter() - started, 1),
    }
    return {"webrtc": figures}
