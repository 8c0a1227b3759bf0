"""The switchboard: calls over the server's WebSocket (and the other transports the server
carries: Twilio's media stream, WebRTC), on the process runtime's `CallLifecycle`.

A call to desk `d` with conversation `c` runs in room `d:c` (see
`voicehub.desks.call_lifecycle`). When the socket closes, delivery is detached and the
session closed, but the room stays open: results that finish later are held and spoken when
the same conversation calls again. A second connection to a live conversation replaces the
first (close 4409), so a caller whose network dropped silently can come back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from starlette.websockets import WebSocketDisconnect

from voicehub.desks.call_lifecycle import (
    CLOSE_WAIT,
    CallLifecycle,
    CallLine,
    CallObserver,
    LiveCall,
    SessionTap,
)
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.memory_trim import MemoryTrimmer
from voicehub.telephony.keypad import Keypad
from voicehub.transports.call_events import CallerText, Hangup, KeypadPress, Playout
from voicehub.transports.websocket import (
    CloseCode,
    ProtocolViolation,
    WebSocketTransport,
    call_rate,
    check_audio_message,
    error_event,
    parse_text_message,
)
from voicehub.voice.events import CallStatus

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.server.settings import ServerSettings
    from voicehub.transports.websocket import OutboundSocket
    from voicehub.voice.session import VoiceSession
    from voicehub.voice.transport import CallTransport

__all__ = [
    "CONVERSATION_PATTERN",
    "CallLine",
    "CallObserver",
    "LiveCall",
    "SessionTap",
    "SocketLine",
    "Switchboard",
]

log = logging.getLogger("voicehub.server")

CONVERSATION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class SocketLine(CallLine, Protocol):
    """A call line on a WebSocket (browser, Twilio): it sends what it queues itself."""

    async def pump(self, socket: OutboundSocket) -> None: ...


ReadLoop = Callable[["WebSocket", LiveCall], Coroutine[Any, Any, None]]


class _TrimAfterCalls:
    """Gives freed memory back to the system after each call (`MemoryTrimmer`)."""

    def __init__(self, memory: MemoryTrimmer) -> None:
        self.memory = memory

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        return None

    def call_ended(self, call: LiveCall) -> None:
        self.memory.call_ended()


class Switchboard:
    """Connects the server's calls to desks through the runtime's `CallLifecycle`."""

    def __init__(self, lifecycle: CallLifecycle, settings: ServerSettings) -> None:
        self.lifecycle = lifecycle
        self.settings = settings
        self.memory = MemoryTrimmer()
        # gives freed memory back after each call: the server subscribes it to the calls
        self.memory_observer = _TrimAfterCalls(self.memory)

    @property
    def hub(self) -> Hub:
        return self.lifecycle.hub

    @property
    def desks(self) -> dict[str, Desk]:
        return self.lifecycle.desks

    @property
    def calls(self) -> dict[str, LiveCall]:
        """The live calls of this process, by room id."""
        return self.lifecycle.calls

    @property
    def observers(self) -> list[CallObserver]:
        return self.lifecycle.observers

    @property
    def session_taps(self) -> list[SessionTap]:
        return self.lifecycle.session_taps

    def status(self, call: LiveCall) -> CallStatus:
        """What the conversation is waiting for: activity, tasks, jobs and deliveries."""
        return self.lifecycle.status(call)

    # -- the WebSocket endpoint ------------------------------------------------------------

    async def handle(self, websocket: WebSocket, desk_name: str) -> None:
        """Run one call from accept to cleanup. Never raises for a client's mistake."""
        await websocket.accept()
        query = websocket.query_params
        problem = token_problem(self.settings.token, presented_token(websocket.headers, query))
        if problem is not None:
            await _refuse(websocket, CloseCode.UNAUTHORIZED, "unauthorized", problem)
            return
        desk = self.desks.get(desk_name)
        if desk is None:
            known = ", ".join(sorted(self.desks)) or "none"
            message = f"unknown desk {desk_name!r}; desks here: {known}"
            await _refuse(websocket, CloseCode.UNKNOWN_DESK, "unknown_desk", message)
            return
        conversation = query.get("conversation") or uuid.uuid4().hex[:16]
        if not CONVERSATION_PATTERN.fullmatch(conversation):
            message = (
                f"conversation id {conversation[:80]!r} is not valid: use 1-64 letters, "
                "digits, '.', '_' or '-', starting with a letter or digit"
            )
            await _refuse(websocket, CloseCode.BAD_REQUEST, "bad_conversation", message)
            return
        rate = call_rate(query.get("rate"))
        if isinstance(rate, ProtocolViolation):
            await _refuse(websocket, CloseCode.BAD_REQUEST, rate.code, rate.message)
            return
        line = WebSocketTransport(sample_rate=rate)
        await self.run_socket_call(websocket, LiveCall(desk, conversation, line), line, self._read)

    async def run_socket_call(
        self, websocket: WebSocket, call: LiveCall, line: SocketLine, read: ReadLoop
    ) -> None:
        """Run an accepted socket call until `read` returns (hangup) or the socket ends,
        then clean up. `line` is the call's transport; `read` feeds the session from the
        socket in the transport's protocol."""
        lifecycle = self.lifecycle
        await lifecycle.take_over(call)
        pump = asyncio.create_task(line.pump(websocket))
        reader: asyncio.Task[None] | None = None
        fault: BaseException | None = None  # what the reader raised, when it is ours
        try:
            if await lifecycle.start(call):
                reader = asyncio.create_task(read(websocket, call))
                await asyncio.wait({reader, pump}, return_when=asyncio.FIRST_COMPLETED)
                if (fault := _server_fault(reader)) is not None:
                    lifecycle.fail(call, fault)
            call.end(CloseCode.NORMAL, "call ended")  # the outcome stays as set
            with contextlib.suppress(Exception):  # the client may be gone already
                async with asyncio.timeout(CLOSE_WAIT):
                    await asyncio.shield(pump)
        finally:
            for task in (reader, pump):
                if task is None:
                    continue
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception as exc:  # the socket broke: the call is over either way
                    if exc is not fault:  # a fault was logged by `fail` already
                        log.info("room %s: connection lost: %r", call.room_id, exc)
            await lifecycle.clean_up(call)

    async def run_call(
        self, call: LiveCall, until_over: Callable[[VoiceSession], Awaitable[None]]
    ) -> None:
        """Run a call on another transport (WebRTC) from start to cleanup: like a socket
        call, it replaces a live call of the same conversation and its results are held
        when it ends. `until_over(session)` returns when the call is over."""
        await self.lifecycle.run(call, until_over)

    async def close_all(self) -> None:
        """End every call (server shutdown); their results stay held in the store."""
        await self.lifecycle.close_all()
        await self.memory.aclose()

    async def _read(self, websocket: WebSocket, call: LiveCall) -> None:
        session = call.session
        assert session is not None
        keypad = Keypad(session, call.desk.config.phone, self.hub.store, self.hub.clock)
        try:
            await self._read_messages(websocket, call, session, keypad)
        finally:
            await keypad.aclose()

    async def _read_messages(
        self, websocket: WebSocket, call: LiveCall, session: VoiceSession, keypad: Keypad
    ) -> None:
        settings = self.settings
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data: bytes | None = message.get("bytes")
            text: str | None = message.get("text")
            problem: ProtocolViolation | None
            if data is not None:
                problem = check_audio_message(
                    len(data),
                    max_bytes=settings.max_audio_bytes,
                    sample_rate=call.transport.sample_rate,
                )
                if problem is None:
                    await session.push_audio(data)
                    continue
            elif text is not None:
                parsed = parse_text_message(text, max_bytes=settings.max_text_bytes)
                if isinstance(parsed, ProtocolViolation):
                    problem = parsed
                elif isinstance(parsed, Playout):
                    session.playout_confirmed(parsed.id)
                    continue
                elif isinstance(parsed, Hangup):
                    call.hang_up()
                    return
                elif isinstance(parsed, CallerText):
                    await session.push_text(parsed.text)
                    continue
                elif isinstance(parsed, KeypadPress):
                    for key in parsed.digits:
                        keypad.press(key)
                    continue
                else:
                    call.send(self.status(call))
                    continue
            else:
                continue
            call.send(error_event(problem))
            if problem.close_code is not None:
                call.end(problem.close_code, problem.message, "hung_up")
                return


def _server_fault(reader: asyncio.Task[None]) -> BaseException | None:
    """What a call's socket reader failed with when it is the server's fault: an error
    other than the socket's own end (a session or a handler that raised)."""
    if not reader.done() or reader.cancelled():
        return None
    error = reader.exception()
    if error is None or isinstance(error, WebSocketDisconnect | OSError):
        return None
    return error


async def _refuse(websocket: WebSocket, code: CloseCode, error: str, message: str) -> None:
    """Tell the client why (an error frame, as the reason may be cut) and close."""
    transport = WebSocketTransport()
    transport.send_event_nowait(error_event(ProtocolViolation(error, message)))
    transport.close(code, message)
    with contextlib.suppress(Exception):
        await transport.pump(websocket)
