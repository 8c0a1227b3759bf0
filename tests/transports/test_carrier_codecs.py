"""The Telnyx, Plivo and Vonage codecs and the phone transport over them, without sockets."""

from __future__ import annotations

import base64
import json

import pytest

from voicehub.transports.phone import (
    CallerAudio,
    KeyPressed,
    PhoneStreamTransport,
    PlaybackCleared,
    PlayoutMarked,
    StreamNoted,
    StreamProblem,
    StreamStarted,
    StreamStopped,
)
from voicehub.transports.plivo import PlivoCodec, extra_headers
from voicehub.transports.pump import close_reason
from voicehub.transports.telnyx import REORDER_WINDOW, TelnyxCodec
from voicehub.transports.vonage import VonageCodec


def telnyx_start(encoding: str = "PCMU") -> str:
    start = {
        "call_control_id": "v3:abc",
        "custom_parameters": {"token": "t1"},
        "media_format": {"encoding": encoding, "sample_rate": 8000, "channels": 1},
    }
    return json.dumps({"event": "start", "sequence_number": "1", "stream_id": "S1", "start": start})


def telnyx_media(number: int, payload: bytes = b"\xff" * 160) -> str:
    media = {"track": "inbound", "payload": base64.b64encode(payload).decode()}
    return json.dumps(
        {"event": "media", "sequence_number": str(number), "stream_id": "S1", "media": media}
    )


def test_telnyx_stream_in_order() -> None:
    codec = TelnyxCodec()
    assert isinstance(codec.read('{"event":"connected","version":"1.0.0"}'), StreamNoted)
    started = codec.read(telnyx_start())
    assert isinstance(started, StreamStarted)
    assert (started.stream_id, started.call_id, started.parameters) == (
        "S1",
        "v3:abc",
        {"token": "t1"},
    )
    assert codec.read(telnyx_media(2)) == CallerAudio(b"\xff" * 160)
    dtmf = json.dumps({"event": "dtmf", "stream_id": "S1", "dtmf": {"digit": "7"}})
    assert codec.read(dtmf) == KeyPressed("7")
    mark = json.dumps({"event": "mark", "stream_id": "S1", "mark": {"name": "m1"}})
    assert codec.read(mark) == PlayoutMarked("m1")
    assert isinstance(codec.read('{"event":"stop","stream_id":"S1"}'), StreamStopped)
    assert isinstance(codec.read(telnyx_media(3)), StreamProblem)  # after stop


def test_telnyx_media_out_of_order_is_put_back_in_order() -> None:
    codec = TelnyxCodec()
    codec.read(telnyx_start())
    assert codec.read(telnyx_media(2, b"\x01" * 160)) == CallerAudio(b"\x01" * 160)
    assert isinstance(codec.read(telnyx_media(4, b"\x03" * 160)), StreamNoted)  # held
    assert codec.read(telnyx_media(3, b"\x02" * 160)) == CallerAudio(b"\x02" * 160 + b"\x03" * 160)
    # frame 5 is lost: once the window fills, the stream goes on without it
    events = [codec.read(telnyx_media(n, bytes([n]) * 160)) for n in range(6, 7 + REORDER_WINDOW)]
    assert isinstance(events[-1], CallerAudio) and events[-1].data.startswith(b"\x06" * 160)
    assert isinstance(codec.read(telnyx_media(5)), StreamNoted)  # too late: dropped


def test_telnyx_broken_frames_are_problems_that_name_the_fault() -> None:
    codec = TelnyxCodec()
    assert codec.read(telnyx_media(1)).code == "out_of_order"  # type: ignore[union-attr]
    assert codec.read(telnyx_start("OPUS")).code == "bad_format"  # type: ignore[union-attr]
    assert codec.read(b"\x00").code == "binary_frame"  # type: ignore[union-attr]
    assert codec.read("{").code == "bad_json"  # type: ignore[union-attr]
    assert codec.read('{"event":"hello"}').code == "unknown_event"  # type: ignore[union-attr]
    codec.read(telnyx_start())
    bad = codec.read(json.dumps({"event": "dtmf", "dtmf": {"digit": "x"}}))
    assert isinstance(bad, StreamProblem) and "dtmf.digit" in bad.message
    assert codec.problems == 6


async def test_telnyx_transport_sends_media_marks_and_clear_without_stream_id() -> None:
    codec = TelnyxCodec()
    codec.read(telnyx_start())
    transport = PhoneStreamTransport(codec, sample_rate=8000)
    await transport.send_audio(bytes(640))  # 40 ms of PCM16 at 8 kHz
    await transport.mark("m1")
    frames = [json.loads(f) for f in transport.queued()]
    assert [f["event"] for f in frames] == ["media", "media", "mark"]
    assert frames[2] == {"event": "mark", "mark": {"name": "m1"}}
    assert len(base64.b64decode(frames[0]["media"]["payload"])) == 160
    await transport.send_audio(bytes(320))
    await transport.clear()  # the unsent audio goes; the mark stays (Telnyx returns it)
    assert [json.loads(f)["event"] for f in transport.queued()] == ["mark", "clear"]


def plivo_start(encoding: str = "audio/x-mulaw") -> str:
    start = {
        "callId": "C1",
        "streamId": "P1",
        "accountId": "MA1",
        "tracks": ["inbound"],
        "mediaFormat": {"encoding": encoding, "sampleRate": 8000},
    }
    return json.dumps(
        {"event": "start", "sequenceNumber": 1, "start": start, "extra_headers": "a=1;b=2"}
    )


async def test_plivo_stream_and_its_checkpoints() -> None:
    codec = PlivoCodec()
    started = codec.read(plivo_start())
    assert isinstance(started, StreamStarted) and started.parameters == {"a": "1", "b": "2"}
    media = {"track": "inbound", "chunk": 1, "payload": base64.b64encode(b"\x7f" * 160).decode()}
    assert codec.read(
        json.dumps({"event": "media", "streamId": "P1", "media": media})
    ) == CallerAudio(b"\x7f" * 160)
    played = json.dumps({"event": "playedStream", "streamId": "P1", "name": "m1"})
    assert codec.read(played) == PlayoutMarked("m1")
    assert codec.read(json.dumps({"event": "clearedAudio", "streamId": "P1"})) == PlaybackCleared()
    other = codec.read(json.dumps({"event": "playedStream", "streamId": "P9", "name": "m1"}))
    assert isinstance(other, StreamProblem) and other.code == "wrong_stream"
    assert PlivoCodec().read(plivo_start("audio/x-l16")).code == "bad_format"  # type: ignore[union-attr]

    transport = PhoneStreamTransport(codec, sample_rate=8000)
    await transport.send_audio(bytes(320))
    await transport.mark("m2")
    frames = [json.loads(f) for f in transport.queued()]
    assert frames[0]["event"] == "playAudio"
    assert (
        frames[0]["media"]["contentType"] == "audio/x-mulaw"
        and frames[0]["media"]["sampleRate"] == 8000
    )
    assert frames[1] == {"event": "checkpoint", "streamId": "P1", "name": "m2"}


async def test_plivo_forgets_cleared_checkpoints_so_the_transport_confirms_them() -> None:
    codec = PlivoCodec()
    codec.read(plivo_start())
    confirmed: list[str] = []
    transport = PhoneStreamTransport(codec, sample_rate=8000, marks_dropped=confirmed.append)
    await transport.send_audio(bytes(3200))
    await transport.mark("m1")
    await transport.clear()
    assert confirmed == ["m1"]
    assert [json.loads(f)["event"] for f in transport.queued()] == ["checkpoint", "clearAudio"]
    assert transport.mark_echoed("m1") is False  # a late playedStream is ignored


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("a=1;b=2", {"a": "1", "b": "2"}), ("token=x,c=y", {"token": "x", "c": "y"}), ("", {})],
)
def test_plivo_extra_headers(text: str, parsed: dict[str, str]) -> None:
    assert extra_headers(text) == parsed


async def test_vonage_binary_audio_and_json_events() -> None:
    codec = VonageCodec()
    assert codec.read(bytes(640)).code == "out_of_order"  # type: ignore[union-attr]
    connected = {
        "event": "websocket:connected",
        "content-type": "audio/l16;rate=16000",
        "call_uuid": "U1",
    }
    started = codec.read(json.dumps(connected))
    assert isinstance(started, StreamStarted) and started.call_id == "U1"
    assert started.wire.encoding == "pcm16" and started.wire.sample_rate == 16000
    assert codec.read(bytes(640)) == CallerAudio(bytes(640))
    assert codec.read('{"event":"websocket:dtmf","digit":"#","duration":260}') == KeyPressed("#")
    assert codec.read('{"event":"websocket:dtmf","dtmf":{"digit":"3"}}') == KeyPressed("3")
    assert codec.read('{"event":"websocket:notify","payload":{"name":"m1"}}') == PlayoutMarked("m1")
    assert codec.read('{"event":"websocket:cleared"}') == PlaybackCleared()
    assert (
        VonageCodec()
        .read('{"event":"websocket:connected","content-type":"audio/l16;rate=44100"}')
        .code
        == "bad_format"
    )  # type: ignore[union-attr]

    transport = PhoneStreamTransport(codec, sample_rate=16000)  # no resampling at all
    await transport.send_audio(bytes(1000))
    await transport.mark("m2")
    frames = transport.queued()
    assert [len(f) for f in frames[:2]] == [640, 640]  # the short last frame padded
    assert frames[2] == '{"action":"notify","payload":{"name":"m2"}}'
    await transport.clear()
    assert transport.queued() == [
        '{"action":"notify","payload":{"name":"m2"}}',
        '{"action":"clear"}',
    ]


def test_close_reasons_are_cut_on_a_character_boundary() -> None:
    reason = "é" * 100  # 200 bytes of UTF-8
    cut = close_reason(reason)
    assert len(cut.encode()) <= 123 and cut.endswith("...")
    assert close_reason("short") == "short"
