"""The Media Streams parser, the inbound state machine and the transport, without sockets."""

from __future__ import annotations

import base64
import json

import numpy as np

from voicehub.transports.twilio import (
    Media,
    StreamProblem,
    StreamReader,
    TwilioMediaTransport,
    parse_stream_message,
)
from voicehub.voice.audio import int16_to_pcm16

SID = "MZ1"
FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}


def start(sid: str = SID, **fmt: object) -> str:
    info = {"streamSid": sid, "callSid": "CA1", "mediaFormat": {**FORMAT, **fmt}}
    return json.dumps({"event": "start", "streamSid": sid, "start": info})


def media(payload: bytes = b"\xff" * 160, sid: str = SID) -> str:
    return json.dumps(
        {
            "event": "media",
            "streamSid": sid,
            "media": {"payload": base64.b64encode(payload).decode()},
        }
    )


def codes(reader: StreamReader, frames: list[str | bytes]) -> list[str]:
    out = []
    for frame in frames:
        result = reader.accept(parse_stream_message(frame))
        out.append(result.code if isinstance(result, StreamProblem) else result.event)
    return out


def test_a_whole_stream_in_order_is_accepted() -> None:
    mark = json.dumps({"event": "mark", "streamSid": SID, "mark": {"name": "s1"}})
    dtmf = json.dumps({"event": "dtmf", "streamSid": SID, "dtmf": {"digit": "#"}})
    stop = json.dumps({"event": "stop", "streamSid": SID, "stop": {}})
    frames: list[str | bytes] = ['{"event":"connected"}', start(), media(), dtmf, mark, stop]
    assert codes(StreamReader(), frames) == ["connected", "start", "media", "dtmf", "mark", "stop"]


def test_out_of_order_foreign_and_broken_frames_are_problems() -> None:
    reader = StreamReader()
    frames: list[str | bytes] = [
        media(),  # before start
        start(encoding="audio/x-alaw"),
        b"\x00\x01",
        "{",
        start(),
        start(),  # a second start
        media(sid="MZ2"),
        json.dumps({"event": "stop"}),
        media(),  # after stop
    ]
    assert codes(reader, frames) == [
        "out_of_order",
        "bad_format",
        "binary_frame",
        "bad_json",
        "start",
        "out_of_order",
        "wrong_stream",
        "stop",
        "after_stop",
    ]
    assert reader.problems == 7


async def test_agent_audio_goes_out_as_20_ms_mulaw_media_then_the_mark() -> None:
    transport = TwilioMediaTransport(SID, sample_rate=16000)
    tone = (8000 * np.sin(np.arange(16000 // 4) * 2 * np.pi * 440 / 16000)).astype(np.int16)
    await transport.send_audio(int16_to_pcm16(tone))  # 250 ms at 16 kHz
    await transport.mark("seg-1")
    frames = [json.loads(item) for item in transport.queued() if isinstance(item, str)]
    kinds = [f["event"] for f in frames]
    assert kinds[-1] == "mark" and frames[-1] == {
        "event": "mark",
        "streamSid": SID,
        "mark": {"name": "seg-1"},
    }
    sizes = [len(base64.b64decode(f["media"]["payload"])) for f in frames if f["event"] == "media"]
    # 250 ms less the resampler's 2 ms of filter latency
    assert sum(sizes) in range(1980, 2001) and all(size == 160 for size in sizes[:-1])
    assert all(f["streamSid"] == SID for f in frames)


async def test_clear_drops_unsent_media_but_keeps_marks_and_events_are_not_sent() -> None:
    transport = TwilioMediaTransport(SID)
    await transport.send_audio(bytes(3200))
    await transport.mark("seg-1")
    await transport.send_audio(bytes(3200))
    await transport.send_event({"type": "transcript"})
    await transport.clear()
    frames = [json.loads(item) for item in transport.queued() if isinstance(item, str)]
    assert [f["event"] for f in frames] == ["mark", "clear"]
    assert transport.events_dropped == 1


def test_caller_mulaw_is_upsampled_for_the_session() -> None:
    transport = TwilioMediaTransport(SID, sample_rate=16000)
    parsed = parse_stream_message(media(b"\xff" * 160))
    assert isinstance(parsed, Media)
    assert len(transport.caller_audio(b"\xff" * 1600)) in range(6200, 6401)  # 200 ms, 16 kHz
