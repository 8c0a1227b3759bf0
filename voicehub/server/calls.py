"""The switchboard: one WebSocket call per conversation, on the server's single hub.

A call to desk `d` with conversation `c` runs in room `d:c`, created (or reopened) with the
desk's call orchestration by the `SessionFactory`; the agent that has the conversation (the
front agent with its delegate tools, or a pipeline/swarm agent) runs in the voice session.
Task and delivery hooks of the hub are forwarded as call events to the call of the room
they concern (task events carry the parent room id; nested child rooms
`d:c::task-1::task-1` belong to `d:c` too).

When the socket closes, delivery is detached and the session closed, but the room stays
open: results that finish later are held and spoken when the same conversation calls
again. A second connection to a live conversation replaces the first (close 4409), so a
caller whose network dropped silently can come back at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.server.auth import presented_token, token_problem
from voicehub.server.keypad import Keypad
from voicehub.server.memory_trim import MemoryTrimmer
from voicehub.transports.websocket import (
    CloseCode,
    ProtocolViolation,
    WebSocketTransport,
    call_rate,
    check_audio_message,
    error_event,
    parse_text_message,
)
from voicehub.voice.audio import frame_bytes
from voicehub.voice.events import (
    CallerText,
    CallSession,
    CallStatus,
    DeliveryAttempt,
    DeliveryOutcome,
    Hangup,
    KeypadPress,
    Playout,
    ServerEvent,
    TaskFinished,
    TaskStarted,
)
from voicehub.voice.transport import CallTransport

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import SessionFactory
    from voicehub.hub import Hub
    from voicehub.server.settings import ServerSettings
    from voicehub.transports.websocket import OutboundSocket
    from voicehub.voice.session import VoiceSession

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
_CLOSE_WAIT = 2.0  # seconds a client gets to complete the close handshake


class CallLine(CallTransport, Protocol):
    """A call's transport as the switchboard uses it (WebSocket, Twilio, WebRTC)."""

    def send_event_nowait(self, event: ServerEvent) -> None: ...

    def close(self, code: int = 1000, reason: str = "") -> None: ...


class SocketLine(CallLine, Protocol):
    """A call line on a WebSocket (browser, Twilio): it sends what it queues itself."""

    async def pump(self, socket: OutboundSocket) -> None: ...


ReadLoop = Callable[["WebSocket", "LiveCall"], Coroutine[Any, Any, None]]


class CallObserver(Protocol):
    """Sees each call start and end (metrics, draining). `call_started` returns the
    transport the voice session should use: `transport` itself, or a wrapper of it."""

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport: ...

    def call_accepted(self, call: LiveCall) -> None:
        """The call's session started (a call whose desk cannot start never gets here)."""

    def call_ended(self, call: LiveCall) -> None: ...


class SessionTap(Protocol):
    """Sees each call's session as it starts (recordings): returns the session the server
    feeds the caller's audio to, `session` itself or a wrapper of it."""

    def session_started(self, call: LiveCall, session: VoiceSession) -> VoiceSession: ...


class LiveCall:
    """One connected call: its room, transport and (once started) session."""

    def __init__(self, desk: Desk, conversation: str, transport: CallLine) -> None:
        self.desk = desk
        self.conversation = conversation
        self.room_id = f"{desk.name}:{conversation}"
        self.transport = transport
        self.session: VoiceSession | None = None
        self.started_at = time.time()
        self.finished = asyncio.Event()

    def end(self, code: int, reason: str) -> None:
        """Close the socket after what is queued (the handler then cleans up)."""
        self.transport.close(code, reason)

    def send(self, event: ServerEvent) -> None:
        """Queue an event for the caller."""
        self.transport.send_event_nowait(event)


class Switchboard:
    """Connects WebSocket calls to desks on one hub and forwards hub events to them."""

    def __init__(
        self,
        hub: Hub,
        desks: dict[str, Desk],
        factory: SessionFactory,
        settings: ServerSettings,
    ) -> None:
        self.hub = hub
        self.desks = desks
        self.factory = factory
        self.settings = settings
        self._releasing: set[asyncio.Task[None]] = set()
        self.calls: dict[str, LiveCall] = {}
        self.memory = MemoryTrimmer()
        self.observers: list[CallObserver] = []
        self.session_taps: list[SessionTap] = []
        self._install_hooks()

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
        await self._take_over(call)
        pump = asyncio.create_task(line.pump(websocket))
        reader: asyncio.Task[None] | None = None
        try:
            if await self._start(call):
                reader = asyncio.create_task(read(websocket, call))
                await asyncio.wait({reader, pump}, return_when=asyncio.FIRST_COMPLETED)
            call.end(CloseCode.NORMAL, "call ended")
            with contextlib.suppress(Exception):  # the client may be gone already
                await asyncio.wait_for(asyncio.shield(pump), _CLOSE_WAIT)
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
                    log.info("room %s: connection lost: %r", call.room_id, exc)
            await self._clean_up(call)

    async def run_call(
        self, call: LiveCall, until_over: Callable[[VoiceSession], Awaitable[None]]
    ) -> None:
        """Run a call on another transport (WebRTC) from start to cleanup: like a socket
        call, it replaces a live call of the same conversation and its results are held
        when it ends. `until_over(session)` returns when the call is over."""
        await self._take_over(call)
        try:
            if await self._start(call):
                assert call.session is not None
                await until_over(call.session)
        finally:
            call.end(CloseCode.NORMAL, "call ended")
            await self._clean_up(call)

    async def _take_over(self, call: LiveCall) -> None:
        """Make `call` the conversation's live call, ending an older one first."""
        while (previous := self.calls.get(call.room_id)) is not None:
            previous.end(CloseCode.REPLACED, "replaced by a newer connection to this conversation")
            await previous.finished.wait()
        self.calls[call.room_id] = call

    async def _start(self, call: LiveCall) -> bool:
        desk, hub, room_id = call.desk, self.hub, call.room_id
        try:
            resumed = room_id in hub.rooms or await hub.store.get_room(room_id) is not None
            call.send(
                CallSession(
                    room_id=room_id,
                    conversation=call.conversation,
                    desk=desk.name,
                    title=desk.title,
                    resumed=resumed,
                    greeting=desk.greeting is not None and not resumed,
                    sample_rate=call.transport.sample_rate,
                    frame_bytes=frame_bytes(call.transport.sample_rate),
                )
            )
            transport: CallTransport = call.transport
            for observer in self.observers:
                transport = observer.call_started(call, transport)
            session = await self.factory.start(hub, desk, room_id, transport)
            for tap in self.session_taps:
                session = tap.session_started(call, session)
            call.session = session
            for observer in self.observers:
                observer.call_accepted(call)
        except Exception as exc:
            log.exception("room %s: could not start the voice session", room_id)
            message = f"could not start the call: {type(exc).__name__}: {exc}"
            call.send(error_event(ProtocolViolation("session_failed", message)))
            call.end(CloseCode.INTERNAL_ERROR, "could not start the call")
            return False
        log.info("room %s: call started (resumed=%s)", room_id, resumed)
        return True

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
                    call.end(CloseCode.NORMAL, "hangup")
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
                call.end(problem.close_code, problem.message)
                return

    async def _clean_up(self, call: LiveCall) -> None:
        try:
            if call.session is not None:
                await self.hub.delivery.detach(call.room_id)
                await call.session.aclose()
        except Exception:
            log.exception("room %s: error while ending the call", call.room_id)
        finally:
            if self.calls.get(call.room_id) is call:
                del self.calls[call.room_id]
            try:
                await self._release(call.room_id)
            except Exception:
                log.exception("room %s: could not unload the room", call.room_id)
            call.finished.set()
            self.memory.call_ended()
            for observer in self.observers:
                observer.call_ended(call)
            log.info("room %s: call ended", call.room_id)

    async def _release(self, room_id: str) -> None:
        """Unload an ended call's room from memory (it stays open in the store for a
        reconnect). While its workers still run it stays loaded; a background job releases
        it when they are done, unless the caller is back by then."""
        if room_id in self.calls or await self.hub.release_room(room_id):
            return
        handles = self.hub.tasks.of_room(room_id)
        jobs = self.hub.jobs.of_room(room_id)

        async def later() -> None:
            await asyncio.gather(*(h.result() for h in handles), *jobs, return_exceptions=True)
            await self._release(room_id)

        self._releasing.add(task := asyncio.create_task(later()))
        task.add_done_callback(self._releasing.discard)

    async def close_all(self) -> None:
        """End every call (server shutdown); their results stay held in the store."""
        calls = list(self.calls.values())
        for call in calls:
            call.end(CloseCode.GOING_AWAY, "server shutting down")
        for call in calls:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.finished.wait(), _CLOSE_WAIT + 3.0)
        await self.memory.aclose()

    # -- status and hub events -------------------------------------------------------------

    def status(self, call: LiveCall) -> CallStatus:
        """What the conversation is waiting for: activity, tasks, jobs and deliveries."""
        hub, room_id = self.hub, call.room_id
        status = CallStatus(
            room_id=room_id,
            running_tasks=len(hub.tasks.of_room(room_id)),
            background_jobs=len(hub.jobs.of_room(room_id)),
            pending_deliveries=len(hub.delivery.pending(room_id)),
        )
        if call.session is None:
            return status
        snapshot = call.session.activity.snapshot()
        return status.model_copy(
            update={
                "idle": snapshot.is_idle,
                "user_speaking": snapshot.user_speaking,
                "agent_speaking": snapshot.agent_speaking,
                "agent_thinking": snapshot.agent_thinking,
                "reply_queued": snapshot.reply_queued,
                "awaiting_answer": snapshot.user_turn_awaiting_answer,
                "playout_pending": snapshot.playout_pending,
            }
        )

    def _install_hooks(self) -> None:
        hooks = self.hub.hooks
        hooks.add(HookTrigger.ON_TASK_DELEGATED, self._task_started, name="switchboard")
        hooks.add(HookTrigger.ON_TASK_COMPLETED, self._task_finished, name="switchboard")
        hooks.add(HookTrigger.BEFORE_DELIVER, self._delivery_attempt, name="switchboard")
        hooks.add(HookTrigger.AFTER_DELIVER, self._delivery_outcome, name="switchboard")

    def _call_of(self, room_id: str) -> LiveCall | None:
        # Child rooms are `<parent>::task-<n>`; conversation ids cannot contain ':'.
        return self.calls.get(room_id.split("::", 1)[0])

    async def _task_started(self, event: Event, context: HookContext) -> None:
        call = self._call_of(event.room_id)
        if call is not None:
            task_id = event.metadata.get("task_id")
            call.send(
                TaskStarted(
                    task_id=task_id,
                    agent_id=event.metadata.get("agent_id"),
                    task=event.text,
                    room_id=event.room_id,
                    child_room_id=task_id,
                )
            )

    async def _task_finished(self, event: Event, context: HookContext) -> None:
        call = self._call_of(event.room_id)
        if call is not None:
            meta = event.metadata
            call.send(
                TaskFinished(
                    task_id=meta.get("task_id"),
                    agent_id=meta.get("agent_id"),
                    status=meta.get("status"),
                    summary=event.text,
                    room_id=event.room_id,
                )
            )

    async def _delivery_attempt(self, event: Event, context: HookContext) -> None:
        call = self._call_of(event.room_id)
        if call is not None:
            call.send(DeliveryAttempt(**_delivery_fields(event)))

    async def _delivery_outcome(self, event: Event, context: HookContext) -> None:
        call = self._call_of(event.room_id)
        if call is not None:
            meta = event.metadata
            call.send(
                DeliveryOutcome(
                    **_delivery_fields(event),
                    outcome=meta.get("outcome"),
                    final=meta.get("final"),
                    error=meta.get("error"),
                )
            )


def _delivery_fields(event: Event) -> dict[str, Any]:
    """What both delivery events say, from the delivery service's hook event."""
    meta = event.metadata
    return {
        "delivery_id": meta.get("delivery_id"),
        "strategy": meta.get("strategy"),
        "attempt": meta.get("attempt"),
        "kind": meta.get("kind"),
        "text": event.text,
        "room_id": event.room_id,
        "topic": meta.get("task") if isinstance(meta.get("task"), str) else None,
    }


async def _refuse(websocket: WebSocket, code: CloseCode, error: str, message: str) -> None:
    """Tell the client why (an error frame, as the reason may be cut) and close."""
    transport = WebSocketTransport()
    transport.send_event_nowait(error_event(ProtocolViolation(error, message)))
    transport.close(code, message)
    with contextlib.suppress(Exception):
        await transport.pump(websocket)
