"""One carrier media stream on the server, whatever the carrier: the codec decides the wire.

    await run_media_stream(websocket, line, TwilioCodec(), token=from_parameter("token"))

The carrier (a WebSocket *client*) connects; we read until its start frame (within
`START_TIMEOUT`), redeem the one-use stream token our answer webhook minted (in the start's
custom parameters, or in the stream URL's path where the carrier allows no parameters), and
run the call on the switchboard: caller audio to the session, playout marks to the session,
key presses to the keypad, the carrier's stop as the caller's hang-up. A carrier that sends
no stop (Plivo, Vonage) ends the stream by closing the socket: `close_is_hang_up`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from voicehub.desks.call_lifecycle import LiveCall
from voicehub.telephony.keypad import Keypad
from voicehub.telephony.stream_tokens import StreamGrant
from voicehub.transports.phone import (
    CallerAudio,
    KeyPressed,
    PhoneCodec,
    PhoneStreamTransport,
    PlayoutMarked,
    StreamNoted,
    StreamProblem,
    StreamStarted,
    StreamStopped,
)
from voicehub.transports.pump import close_reason

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

    from voicehub.telephony.line import PhoneLine
    from voicehub.voice.session import VoiceSession

__all__ = ["SESSION_RATE", "START_TIMEOUT", "TokenOf", "from_parameter", "run_media_stream"]

log = logging.getLogger("voicehub.telephony")

START_TIMEOUT = 10.0  # seconds a carrier gets to send its start frame after connecting
# The session runs at 16 kHz, as for browsers: a phone transport resamples in numpy. (At
# 8 kHz livekit's own resampling in front of PocketSphinx garbled phone speech in tests.)
SESSION_RATE = 16000
_MAX_PROBLEMS_BEFORE_START = 20  # frames dropped before the start before we give up

TokenOf = Callable[[StreamStarted], "str | None"]


def from_parameter(name: str) -> TokenOf:
    """The stream token is the start frame's custom parameter `name`."""
    return lambda started: started.parameters.get(name)


async def run_media_stream(
    websocket: WebSocket,
    line: PhoneLine,
    codec: PhoneCodec,
    *,
    token: TokenOf,
    close_is_hang_up: bool = False,
) -> None:
    """Run one media stream from accept to cleanup (see the module)."""
    await websocket.accept()
    with contextlib.suppress(TimeoutError, _Gone):
        async with asyncio.timeout(START_TIMEOUT):
            await _until_start(websocket, codec)
    started = codec.started
    if started is None:
        log.warning("%s media stream closed: no valid start frame", codec.carrier)
        await _close(websocket, 1008, "expected a start message")
        return
    grant = line.tokens.redeem(token(started))
    desk_name = websocket.path_params["desk"]
    if isinstance(grant, StreamGrant) and grant.desk != desk_name:
        grant = f"the stream token is for desk {grant.desk!r}, not {desk_name!r}"
    if not isinstance(grant, StreamGrant) or grant.desk not in line.board.desks:
        reason = grant if isinstance(grant, str) else f"desk {desk_name!r} is gone"
        log.warning("%s media stream %s refused: %s", codec.carrier, started.stream_id, reason)
        await _close(websocket, 1008, reason)
        return

    def confirm_dropped(name: str) -> None:
        # a mark is sent under the call's session: it is told a mark a `clear` dropped
        if call.session is not None:
            call.session.playout_confirmed(name)

    transport = PhoneStreamTransport(
        codec,
        sample_rate=SESSION_RATE,
        call_id=grant.call_sid,
        clock=line.clock,
        marks_dropped=confirm_dropped,
    )
    ids = {"call_sid": grant.call_sid, "stream_sid": started.stream_id}
    desk = line.board.desks[grant.desk]
    call = LiveCall(desk, grant.conversation, transport, kind=codec.carrier, line=ids)
    log.info(
        "%s call %s: stream %s in room %s",
        codec.carrier,
        grant.call_sid,
        started.stream_id,
        call.room_id,
    )
    feeder = _Feeder(codec, transport, line, close_is_hang_up=close_is_hang_up)
    await line.board.run_socket_call(websocket, call, transport, feeder.run)


class _Gone(Exception):
    """The socket closed before the start frame."""


async def _until_start(websocket: WebSocket, codec: PhoneCodec) -> None:
    problems = 0
    while codec.started is None:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise _Gone
        event = codec.read(_frame(message))
        if isinstance(event, StreamProblem):
            problems += 1
            log.warning("%s media stream: dropped a frame: %s", codec.carrier, event.message)
            if problems >= _MAX_PROBLEMS_BEFORE_START:
                raise _Gone


class _Feeder:
    """Reads the rest of the stream into the call's session."""

    def __init__(
        self,
        codec: PhoneCodec,
        transport: PhoneStreamTransport,
        line: PhoneLine,
        *,
        close_is_hang_up: bool,
    ) -> None:
        self.codec, self.transport, self.line = codec, transport, line
        self.close_is_hang_up = close_is_hang_up

    async def run(self, websocket: WebSocket, call: LiveCall) -> None:
        session = call.session
        assert session is not None
        store = self.line.board.hub.store
        keypad = Keypad(session, call.desk.config.phone, store, self.line.clock)
        try:
            await self._read(websocket, call, session, keypad)
        finally:
            await keypad.aclose()

    async def _read(
        self, websocket: WebSocket, call: LiveCall, session: VoiceSession, keypad: Keypad
    ) -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                if self.close_is_hang_up:  # this carrier's way of ending a stream
                    call.hang_up("stream closed")
                return
            event = self.codec.read(_frame(message))
            if isinstance(event, CallerAudio):
                await session.push_audio(self.transport.caller_audio(event.data))
            elif isinstance(event, PlayoutMarked):
                if self.transport.mark_echoed(event.name):
                    session.playout_confirmed(event.name)
            elif isinstance(event, KeyPressed):
                keypad.press(event.digit)
            elif isinstance(event, StreamStopped):  # the caller hung up
                call.hang_up("stream stopped")
                return
            elif isinstance(event, StreamProblem):
                log.warning("room %s: dropped a frame: %s", call.room_id, event.message)
            elif isinstance(event, StreamNoted):
                log.debug("room %s: %s", call.room_id, event.what)


def _frame(message: Any) -> str | bytes:
    text: str | None = message.get("text")
    if text is not None:
        return text
    data: bytes | None = message.get("bytes")
    return data if data is not None else b""


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    try:
        await websocket.close(code, close_reason(reason))
    except Exception:  # the peer may be gone already
        log.debug("media stream: close failed", exc_info=True)
