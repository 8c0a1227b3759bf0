"""The WebSocket call protocol without sockets: frame validation, message parsing, and the
transport's ordered queue pumped into a recording socket."""

from __future__ import annotations

import asyncio
import json

import pytest

from voicehub.transports.call_events import Hangup, Playout, StatusRequest
from voicehub.transports.websocket import (
    MAX_AUDIO_BYTES,
    CloseCode,
    ProtocolViolation,
    WebSocketTransport,
    check_audio_message,
    error_event,
    parse_text_message,
)
from voicehub.voice.events import FRAME_BYTES, AgentState, CallError, UserState

# -- audio frames ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [640, 1280, 640 * 7, MAX_AUDIO_BYTES])
def test_whole_20_ms_frames_up_to_one_second_are_audio(size: int) -> None:
    assert FRAME_BYTES == 640
    assert check_audio_message(size) is None


def test_a_frame_of_the_wrong_size_is_explained_and_dropped_not_fatal() -> None:
    problem = check_audio_message(333)
    assert problem == ProtocolViolation(
        "bad_audio_frame",
        "audio message of 333 bytes: send 16 kHz mono PCM16 in multiples of 640 bytes (20 ms)",
    )
    assert problem.close_code is None
    assert json.loads(error_event(problem).to_wire()) == {
        "type": "error",
        "code": "bad_audio_frame",
        "message": problem.message,
    }
    assert error_event(problem) == CallError(code="bad_audio_frame", message=problem.message)


@pytest.mark.parametrize("size", [0, 1, 639, 641, 960])
def test_sizes_that_are_not_whole_frames(size: int) -> None:
    problem = check_audio_message(size)
    assert problem is not None and problem.code == "bad_audio_frame"
    assert f"of {size} bytes" in problem.message


def test_more_than_a_second_per_message_closes_with_1009() -> None:
    problem = check_audio_message(MAX_AUDIO_BYTES + FRAME_BYTES)
    assert problem is not None
    assert problem.close_code is CloseCode.MESSAGE_TOO_BIG
    assert int(CloseCode.MESSAGE_TOO_BIG) == 1009
    assert "at most 32000 bytes (1 s)" in problem.message
    assert check_audio_message(1280, max_bytes=640) is not None


# -- text messages --------------------------------------------------------------------------


def test_the_three_client_messages_parse() -> None:
    assert parse_text_message('{"type": "playout", "id": "speech_1/2"}') == Playout(
        type="playout", id="speech_1/2"
    )
    assert parse_text_message('{"type": "hangup"}') == Hangup(type="hangup")
    assert parse_text_message('{"type": "status"}') == StatusRequest(type="status")


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("hello", "bad_json", "not JSON ('hello')"),
        ("", "bad_json", "not JSON"),
        ("[1, 2]", "unknown_message", "a JSON list"),
        ('{"id": "x"}', "unknown_message", "type None"),
        ('{"type": "dance"}', "unknown_message", "type 'dance'"),
        ('{"type": ["playout"]}', "unknown_message", "type ['playout']"),
        ('{"type": "playout"}', "bad_message", "id: required field is missing"),
        ('{"type": "playout", "id": ""}', "bad_message", "id: String should have at least"),
        ('{"type": "playout", "id": 7}', "bad_message", "id: Input should be a valid string"),
        ('{"type": "hangup", "now": true}', "bad_message", "now: unknown field"),
    ],
)
def test_bad_text_messages_say_what_is_expected(text: str, code: str, says: str) -> None:
    problem = parse_text_message(text)
    assert isinstance(problem, ProtocolViolation)
    assert problem.code == code and problem.close_code is None
    assert says in problem.message
    if code != "bad_message":
        assert '{"type": "playout", "id": "..."}' in problem.message


def test_an_oversized_text_message_closes_with_1009() -> None:
    problem = parse_text_message('{"type": "playout", "id": "' + "x" * 5000 + '"}')
    assert isinstance(problem, ProtocolViolation)
    assert problem.close_code == 1009 and "at most 4096 bytes" in problem.message


# -- the transport ----------------------------------------------------------------------------


class RecordingSocket:
    def __init__(self, fail_after: int | None = None) -> None:
        self.sent: list[bytes | str | tuple[int, str | None]] = []
        self.fail_after = fail_after

    def _record(self, item: bytes | str | tuple[int, str | None]) -> None:
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            raise ConnectionError("the client went away")
        self.sent.append(item)

    async def send_bytes(self, data: bytes) -> None:
        self._record(data)

    async def send_text(self, data: str) -> None:
        self._record(data)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self._record((code, reason))


def decoded(sent: list[bytes | str | tuple[int, str | None]]) -> list[object]:
    """What the socket got, text frames as JSON values (their spacing is not the protocol)."""
    return [json.loads(item) if isinstance(item, str) else item for item in sent]


async def test_frames_go_out_in_order_and_the_mark_follows_its_audio() -> None:
    transport = WebSocketTransport()
    socket = RecordingSocket()
    pump = asyncio.create_task(transport.pump(socket))
    await transport.send_audio(b"\x01\x00" * 320)
    await transport.mark("speech-1/1")
    await transport.send_event(AgentState(state="listening"))
    transport.close(CloseCode.NORMAL, "bye")
    await asyncio.wait_for(pump, 5)
    assert decoded(socket.sent) == [
        b"\x01\x00" * 320,
        {"type": "speech_mark", "id": "speech-1/1", "track_ms": None},
        {"type": "agent_state", "state": "listening"},
        (1000, "bye"),
    ]
    assert transport.audio_bytes_sent == 640
    await transport.send_audio(b"\x00" * 640)  # after close: dropped, never raises
    assert transport.closing


async def test_clear_drops_unsent_audio_but_keeps_events_and_marks() -> None:
    transport = WebSocketTransport()
    await transport.send_audio(b"a" * 640)
    await transport.mark("m1")
    await transport.send_audio(b"b" * 640)
    await transport.clear()
    transport.close()
    socket = RecordingSocket()
    await asyncio.wait_for(transport.pump(socket), 5)
    assert decoded(socket.sent) == [
        {"type": "speech_mark", "id": "m1", "track_ms": None},
        {"type": "clear"},
        (1000, ""),
    ]


async def test_a_failing_socket_ends_the_pump_and_later_sends_are_dropped() -> None:
    transport = WebSocketTransport()
    socket = RecordingSocket(fail_after=1)
    pump = asyncio.create_task(transport.pump(socket))
    await transport.send_event(UserState(state="speaking"))
    await transport.send_event(UserState(state="listening"))
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(pump, 5)
    assert transport.closing
    await transport.send_event(UserState(state="speaking"))  # ignored
    assert len(socket.sent) == 1


async def test_close_reasons_are_cut_to_the_protocol_limit() -> None:
    transport = WebSocketTransport()
    transport.close(CloseCode.UNKNOWN_DESK, "é" * 200)
    socket = RecordingSocket()
    await transport.pump(socket)
    [sent] = socket.sent
    assert isinstance(sent, tuple)
    code, reason = sent
    assert code == 4404
    assert reason is not None and len(reason.encode()) <= 123 and reason.endswith("...")
