"""The life of a call on one process, whatever carries it (WebSocket, Twilio, WebRTC, LiveKit).

A call to desk `d` with conversation `c` runs in room `d:c`, created (or reopened) with the
desk's call orchestration by the desk's voice stack (`voicehub.desks.voice_stack`).
`CallLifecycle.run` takes a `LiveCall` from start to end:

1. it becomes the conversation's live call here, replacing an older one (close 4409), so a
   caller whose network dropped silently can come back at once; its `CallRecord` in the
   store names this instance (`CallBook`): a call live on another instance ends there, and
   a call that instance lost goes on here (`voicehub.desks.call_resume`);
2. the session starts on the call's transport (observers may wrap the transport first), from
   one `CallSpec`;
3. task and delivery hooks of the hub are sent to the call as events (task events carry the
   parent room id; nested child rooms `d:c::task-1::task-1` belong to `d:c` too);
4. when the call is over, delivery is detached and the session closed, but the room stays
   open: results that finish later are held and spoken when the same conversation calls
   again. The room is unloaded from memory once its background workers are done. The call
   record says how it ended (`LiveCall.outcome`): hung up, handed over (this instance
   stops: the next one goes on without a word), or lost (the caller may come back).

`voicehub serve` (`voicehub.server.calls`) and each LiveKit job (`voicehub.workers.job`) run
their calls through the lifecycle of their `ProcessRuntime`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import CallState
from voicehub.desks.call_book import CallBook, Takeover
from voicehub.desks.call_resume import CallResume, pending_question
from voicehub.desks.voice_stack import CallSpec, room_exists
from voicehub.errors import VoicehubError
from voicehub.voice.audio import frame_bytes
from voicehub.voice.events import (
    CallError,
    CallSession,
    CallStatus,
    DeliveryAttempt,
    DeliveryOutcome,
    ServerEvent,
    TaskFinished,
    TaskStarted,
)
from voicehub.voice.transport import CallTransport

if TYPE_CHECKING:
    from voicehub.core.events import Event
    from voicehub.desks.desk import Desk
    from voicehub.desks.voice_stack import TurnObserverSource, VoiceStack
    from voicehub.hub import Hub
    from voicehub.voice.engine.latency import TurnObserver
    from voicehub.voice.session import VoiceSession

__all__ = [
    "CLOSE_WAIT",
    "CallLifecycle",
    "CallLine",
    "CallObserver",
    "CallOutcome",
    "CloseCode",
    "LiveCall",
    "SessionTap",
]

log = logging.getLogger("voicehub.calls")

CLOSE_WAIT = 2.0
"""Seconds a client gets to complete the close handshake."""


class CloseCode(IntEnum):
    """How the lifecycle ends a line: the WebSocket close codes of
    `voicehub.transports.websocket.CloseCode`, which every transport maps to its own way of
    hanging up (Twilio closes its stream, WebRTC announces the code, LiveKit leaves)."""

    NORMAL = 1000
    INTERNAL_ERROR = 1011
    SERVICE_RESTART = 1012  # handed over: the caller comes back to the conversation now
    REPLACED = 4409


HANDOVER_REASON = "this server is restarting: reconnect to go on"

CallOutcome = Literal["hung_up", "handed_over", "replaced", "lost"]
"""How a call ended here: the caller hung up (or the call was ended on purpose), this
instance handed it over (it stops), another connection took it, or the line was lost."""

_STATE_AFTER: dict[CallOutcome, CallState | None] = {
    "hung_up": CallState.ENDED,
    "handed_over": CallState.HANDING_OVER,
    "replaced": None,  # the new owner wrote the record
    "lost": None,  # left live: the caller may come back, here or elsewhere
}


class CallLine(CallTransport, Protocol):
    """A call's transport as the lifecycle uses it (WebSocket, Twilio, WebRTC, LiveKit)."""

    def send_event_nowait(self, event: ServerEvent) -> None: ...

    def close(self, code: int = 1000, reason: str = "") -> None: ...


class CallObserver(Protocol):
    """Sees each call start and end (metrics, draining). `call_started` returns the
    transport the voice session should use: `transport` itself, or a wrapper of it."""

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport: ...

    def call_accepted(self, call: LiveCall) -> None:
        """The call's session started (a call whose desk cannot start never gets here)."""

    def call_ended(self, call: LiveCall) -> None: ...


class SessionTap(Protocol):
    """Sees each call's session as it starts (recordings): returns the session the process
    feeds the caller's audio to, `session` itself or a wrapper of it."""

    def session_started(self, call: LiveCall, session: VoiceSession) -> VoiceSession: ...


class LiveCall:
    """One connected call: its room, transport and (once started) session. `kind` names
    the transport ("websocket", "twilio", "webrtc", "livekit"), `line` its ids a successor
    needs (a Twilio call sid, a LiveKit room); `outcome` says how it ended (set by whoever
    ends it; "lost" until then), `takeover` how it continued the conversation's last call."""

    def __init__(
        self,
        desk: Desk,
        conversation: str,
        transport: CallLine,
        *,
        kind: str = "websocket",
        line: dict[str, str] | None = None,
    ) -> None:
        self.desk = desk
        self.conversation = conversation
        self.room_id = f"{desk.name}:{conversation}"
        self.transport = transport
        self.kind = kind
        self.line = dict(line or {})
        self.session: VoiceSession | None = None
        self.started_at = time.time()
        self.finished = asyncio.Event()
        self.outcome: CallOutcome = "lost"
        self.takeover = Takeover("new")
        self.saying: asyncio.Task[None] | None = None  # what the lifecycle says on the call

    def end(self, code: int, reason: str, outcome: CallOutcome | None = None) -> None:
        """Close the line after what is queued (the call's runner then cleans up); the
        first `outcome` given is the one recorded."""
        if outcome is not None and self.outcome == "lost" and not self.finished.is_set():
            self.outcome = outcome
        self.transport.close(code, reason)

    def hang_up(self, reason: str = "hangup") -> None:
        """The caller hung up (or the call is over on purpose): end it for good."""
        self.end(CloseCode.NORMAL, reason, "hung_up")

    def send(self, event: ServerEvent) -> None:
        """Queue an event for the caller."""
        self.transport.send_event_nowait(event)


class CallLifecycle:
    """The calls of one process on its hub: start, replace, forward hub events, end.

    Each call's session comes from `voice` (the registry of voice stacks, or one stack for
    every desk). `book` holds this instance's call records (default: on the hub's store).
    Observers see each call start and end (`observe`), session taps each session
    (`tap`), and turn observer sources give each session its turns' observers
    (`observe_turns`); the process subscribes them before its first call."""

    def __init__(
        self,
        hub: Hub,
        desks: dict[str, Desk],
        voice: VoiceStack,
        *,
        book: CallBook | None = None,
    ) -> None:
        self.hub = hub
        self.desks = desks
        self.voice = voice
        self.book = (
            book if book is not None else CallBook(hub.store, hub.instance_id, wall=hub.wall)
        )
        self.calls: dict[str, LiveCall] = {}
        self.observers: list[CallObserver] = []
        self.session_taps: list[SessionTap] = []
        self.turn_source: TurnObserverSource | None = None
        self._releasing = TaskSet("releasing ended calls' rooms")
        self._speaking = TaskSet("words said on resumed calls")
        self._install_hooks()

    def observe(self, observer: CallObserver) -> None:
        """Tell `observer` each call's start and end (in the order subscribed)."""
        self.observers.append(observer)

    def tap(self, tap: SessionTap) -> None:
        """Give `tap` each call's session as it starts."""
        self.session_taps.append(tap)

    def observe_turns(self, source: TurnObserverSource) -> None:
        """Give each call's session the observer of its turns `source` makes (one source:
        metrics and traces combine theirs)."""
        if self.turn_source is not None:
            raise VoicehubError("the calls' turns have their observer already")
        self.turn_source = source

    async def run(
        self, call: LiveCall, until_over: Callable[[VoiceSession], Awaitable[None]]
    ) -> None:
        """Run `call` from start to cleanup: it replaces a live call of the same
        conversation, and its results are held when it ends. `until_over(session)` returns
        when the call is over; the line is closed then."""
        await self.take_over(call)
        try:
            if await self.start(call):
                assert call.session is not None
                await until_over(call.session)
        except Exception as error:
            self.fail(call, error)
        finally:
            call.end(CloseCode.NORMAL, "call ended")  # the outcome stays as set
            # shielded: a process shutting down while a call ends must still hold its results
            await asyncio.shield(self.clean_up(call))

    def fail(self, call: LiveCall, error: BaseException) -> None:
        """The call broke on the server's side while it ran: log it with its traceback,
        tell the caller and close the line as an internal error (1011). The outcome stays
        "lost", so its results are held for the caller's next call."""
        log.error("room %s: the call failed", call.room_id, exc_info=error)
        message = f"the call failed on the server: {type(error).__name__}: {error}"
        call.send(CallError(code="call_failed", message=message))
        call.end(CloseCode.INTERNAL_ERROR, "the call failed on the server")

    async def take_over(self, call: LiveCall) -> None:
        """Make `call` the conversation's live call, ending an older one first (here, or on
        the instance its record names)."""
        while (previous := self.calls.get(call.room_id)) is not None:
            previous.end(
                CloseCode.REPLACED,
                "replaced by a newer connection to this conversation",
                "replaced",
            )
            await previous.finished.wait()
        self.calls[call.room_id] = call
        try:
            call.takeover = await self.book.claim(
                call.room_id, call.desk.name, call.conversation, call.kind, call.line
            )
        except Exception:  # the store is away: the caller is answered all the same
            log.exception("room %s: could not record the call", call.room_id)

    async def start(self, call: LiveCall) -> bool:
        """Start the call's session (after `take_over`); False, the caller told why, when
        it could not start."""
        desk, hub, room_id = call.desk, self.hub, call.room_id
        try:
            resumed = await room_exists(hub, room_id)
            call.send(
                CallSession(
                    room_id=room_id,
                    conversation=call.conversation,
                    desk=desk.name,
                    title=desk.title,
                    resumed=resumed,
                    greeting=desk.greeting is not None and not resumed,
                    continued=call.takeover.continuation,
                    sample_rate=call.transport.sample_rate,
                    frame_bytes=frame_bytes(call.transport.sample_rate),
                )
            )
            transport: CallTransport = call.transport
            for observer in self.observers:
                transport = observer.call_started(call, transport)
            spec = CallSpec(
                hub,
                desk,
                room_id,
                transport,
                reopened=resumed,
                resume=await self._resume(call),
                turn_observer=self._turn_observer(call),
            )
            session = await self.voice.start(spec)
            resume = spec.resume
            for tap in self.session_taps:
                session = tap.session_started(call, session)
            call.session = session
            for observer in self.observers:
                observer.call_accepted(call)
            if resume is not None and (words := resume.words()) is not None:
                self._say(call, words)
        except Exception as exc:
            if isinstance(exc, VoicehubError):  # raised on purpose (a missing key): expected
                log.warning("room %s: call refused: %s: %s", room_id, type(exc).__name__, exc)
            else:
                log.exception("room %s: could not start the voice session", room_id)
            message = f"could not start the call: {type(exc).__name__}: {exc}"
            call.send(CallError(code="session_failed", message=message))
            call.end(CloseCode.INTERNAL_ERROR, "could not start the call", "hung_up")
            return False
        log.info(
            "room %s: %s call started (resumed=%s, %s)",
            room_id,
            call.kind,
            resumed,
            call.takeover.continuation,
        )
        return True

    def _turn_observer(self, call: LiveCall) -> TurnObserver | None:
        source = self.turn_source
        return source.turn_observer(call.desk.name, call.kind, call.room_id) if source else None

    async def _resume(self, call: LiveCall) -> CallResume | None:
        """How the session resumes the conversation's last call (None: it does not)."""
        takeover = call.takeover
        if takeover.continuation == "new":
            return None
        question = None
        if takeover.interrupted:
            try:
                question = await pending_question(self.hub.store, call.room_id)
            except Exception:  # the question is a nicety; the call goes on without it
                log.exception("room %s: could not read the pending question", call.room_id)
        return CallResume(
            takeover.continuation,
            takeover.previous_owner,
            question=question[1] if question else None,
            question_id=question[0] if question else None,
        )

    def _say(self, call: LiveCall, words: str) -> None:
        """Speak `words` on the call as soon as its session is live (in the background)."""
        session = call.session
        assert session is not None

        async def say() -> None:
            try:
                await session.say(words)
            except Exception as exc:  # the call ended first
                log.info("room %s: could not say %r: %r", call.room_id, words, exc)

        call.saying = self._speaking.start(say(), name=f"{call.room_id}: resumed words")

    async def clean_up(self, call: LiveCall) -> None:
        """After the call: hold its results, close its session, record how it ended,
        unload its room."""
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
                    await self.book.release(call.room_id, _STATE_AFTER[call.outcome])
                except Exception:
                    log.exception("room %s: could not record the end of the call", call.room_id)
            try:
                await self.release(call.room_id)
            except Exception:
                log.exception("room %s: could not unload the room", call.room_id)
            call.finished.set()
            for observer in self.observers:
                observer.call_ended(call)
            log.info("room %s: call ended (%s)", call.room_id, call.outcome)

    async def release(self, room_id: str) -> None:
        """Unload an ended call's room from memory (it stays open in the store for a
        reconnect). While its workers still run it stays loaded; a background job releases
        it when they are done, unless the caller is back by then."""
        if room_id in self.calls or await self.hub.release_room(room_id):
            return
        handles = self.hub.tasks.of_room(room_id)
        jobs = self.hub.jobs.of_room(room_id)

        async def later() -> None:
            await asyncio.gather(*(h.result() for h in handles), *jobs, return_exceptions=True)
            await self.release(room_id)

        self._releasing.start(later(), name=f"{room_id}: release")

    async def hand_over(self, call: LiveCall) -> None:
        """End `call` here so that it goes on elsewhere: its record says so first (the
        instance that takes it up goes on without a word), then its line is closed the way
        that makes the caller come back (a WebSocket client reconnects on 1012, Twilio
        follows the TwiML's redirect)."""
        if call.finished.is_set() or call.outcome != "lost":
            return  # over, or ending already
        call.outcome = "handed_over"
        if self.calls.get(call.room_id) is call:
            try:
                await self.book.release(call.room_id, CallState.HANDING_OVER)
            except Exception:  # the store is away: the caller comes back all the same
                log.exception("room %s: could not record the hand-over", call.room_id)
        if call.session is not None:
            try:  # what was just said reaches the line before it closes
                await call.session.flush()
            except Exception:
                log.exception("room %s: could not flush the call's events", call.room_id)
        call.end(CloseCode.SERVICE_RESTART, HANDOVER_REASON)

    async def close_all(self) -> None:
        """End every call (shutdown), handing each over: results stay held in the store,
        and a caller who comes back (at once, to another instance) goes on seamlessly."""
        calls = list(self.calls.values())
        for call in calls:
            await self.hand_over(call)
        for call in calls:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLOSE_WAIT + 3.0):
                    await call.finished.wait()
        self._speaking.cancel()

    def taken_elsewhere(self, room_id: str) -> None:
        """Another instance took up the call of `room_id`: it ends here."""
        call = self.calls.get(room_id)
        if call is not None:
            log.info("room %s: the call went on on another instance: ending it here", room_id)
            call.end(CloseCode.REPLACED, "this call went on on another connection", "replaced")

    async def wait_for_background_work(self, room_ids: list[str], timeout: float) -> bool:
        """Wait (up to `timeout` s) for the workers and jobs of `room_ids`, so their results
        reach the outbox before the process ends; True if all did."""
        pending = [
            *(h.result() for rid in room_ids for h in self.hub.tasks.of_room(rid)),
            *(job for rid in room_ids for job in self.hub.jobs.of_room(rid)),
        ]
        if not pending:
            return True
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*pending, return_exceptions=True)
        except TimeoutError:
            return False
        return True

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

    def call_of(self, room_id: str) -> LiveCall | None:
        """The live call a room (or one of its child rooms) belongs to."""
        # Child rooms are `<parent>::task-<n>`; conversation ids cannot contain ':'.
        return self.calls.get(room_id.split("::", 1)[0])

    def _install_hooks(self) -> None:
        hooks = self.hub.hooks
        hooks.add(HookTrigger.ON_TASK_DELEGATED, self._task_started, name="calls")
        hooks.add(HookTrigger.ON_TASK_COMPLETED, self._task_finished, name="calls")
        hooks.add(HookTrigger.BEFORE_DELIVER, self._delivery_attempt, name="calls")
        hooks.add(HookTrigger.AFTER_DELIVER, self._delivery_outcome, name="calls")

    async def _task_started(self, event: Event, context: HookContext) -> None:
        call = self.call_of(event.room_id)
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
        call = self.call_of(event.room_id)
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
        call = self.call_of(event.room_id)
        if call is not None:
            call.send(DeliveryAttempt(**_delivery_fields(event)))

    async def _delivery_outcome(self, event: Event, context: HookContext) -> None:
        call = self.call_of(event.room_id)
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
