"""Draining: stop taking calls, let the live ones finish, then let the process exit.

`voicehub serve` starts a drain on SIGTERM (what a load balancer's orchestrator sends):

1. `/ready` answers 503 at once, so the balancer stops sending calls here;
2. new calls are refused with a clear reason (`DrainGate`): a WebSocket call gets an
   error frame and close code 1013 (try again later), a WebRTC offer 503 with
   Retry-After, a Twilio webhook TwiML that tells the caller and hangs up;
3. live calls and their background tasks go on until they are over or `seconds` pass;
   calls still live then are ended like at any shutdown (their results stay held in the
   outbox, spoken when the conversation calls back, on any instance);
4. `on_done` runs (the server then shuts down and the process exits 0).

A second SIGTERM (or Ctrl-C) stops at once, as before.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.responses import PlainTextResponse, Response
from starlette.websockets import WebSocket

from voicehub.core.clock import wait_or_sleep
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.transports.websocket import CloseCode, ProtocolViolation, error_event

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from voicehub.core.clock import Clock
    from voicehub.core.events import Event
    from voicehub.server.calls import LiveCall, Switchboard
    from voicehub.voice.transport import CallTransport

__all__ = ["Drain", "DrainGate"]

log = logging.getLogger("voicehub.server")

REFUSAL = "this server is shutting down and takes no new calls; call again in a moment"
_TWIML_REFUSAL = (
    '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Sorry, this line is being '
    "restarted. Please call again in a moment.</Say><Hangup/></Response>"
)

# The entry points of incoming calls: (entry, path, HTTP method or "websocket"). A Twilio
# media stream is not one (its call was answered before the drain), nor a call-back this
# server placed itself.
_ENTRIES = (
    ("websocket", re.compile(r"/desks/[^/]+/call"), "websocket"),
    ("webrtc", re.compile(r"/desks/[^/]+/webrtc"), "POST"),
    ("twilio", re.compile(r"/twilio/[^/]+/voice"), "POST"),
)


class Drain:
    """The drain state of one app: started once, watched by `/ready` and `DrainGate`."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds
        self.draining = False
        self.refused: Callable[[str, str], None] = lambda entry, reason: None
        self._board: Switchboard | None = None
        self._hang_up: list[Callable[[], Awaitable[None]]] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def watch(self, board: Switchboard, *hang_up: Callable[[], Awaitable[None]]) -> None:
        """Follow `board`'s calls and tasks; `hang_up` end the calls left at the deadline
        (the switchboard's own `close_all` is always among them)."""
        self._board = board
        self._hang_up = [*hang_up, board.close_all]
        board.observers.append(self)
        board.hub.hooks.add(HookTrigger.ON_TASK_COMPLETED, self._task_completed, name="drain")

    def begin(self, on_done: Callable[[], None] | None = None) -> None:
        """Start draining (idempotent): `/ready` turns 503 now, the rest runs in a task.
        Call from the event loop's thread (a signal handler may set `draining` first)."""
        self.draining = True
        if self._task is not None:
            return
        log.info("draining: no new calls; waiting up to %.0f s for live calls", self.seconds)
        self._task = asyncio.get_running_loop().create_task(self._run(on_done))

    async def wait(self) -> None:
        """Until the drain started by `begin` is over."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def busy(self) -> bool:
        """Live calls, or background work that will produce results for them."""
        board = self._board
        return board is not None and bool(board.calls or board.hub.tasks.live)

    async def _run(self, on_done: Callable[[], None] | None) -> None:
        deadline = self.clock.now() + self.seconds
        try:
            while self.busy() and (left := deadline - self.clock.now()) > 0:
                self._changed.clear()
                await wait_or_sleep(self.clock, self._changed, left)
            if self.busy():
                log.info("drain time is up: ending the calls left; their results stay held")
                for hang_up in self._hang_up:
                    try:
                        await hang_up()
                    except Exception:
                        log.exception("draining: could not end the calls")
            log.info("drained")
        finally:
            if on_done is not None:
                on_done()

    # -- what it watches -----------------------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        return None

    def call_ended(self, call: LiveCall) -> None:
        self._changed.set()

    async def _task_completed(self, event: Event, context: HookContext) -> None:
        self._changed.set()


class DrainGate:
    """ASGI middleware: while draining, refuse requests that would start a call."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        entry = self._entry(scope) if self.drain.draining else None
        if entry is None:
            await self.app(scope, receive, send)
            return
        self.drain.refused(entry, "draining")
        if scope["type"] == "websocket":
            socket = WebSocket(scope, receive, send)
            await socket.accept()
            await socket.send_text(error_event(ProtocolViolation("draining", REFUSAL)).to_wire())
            await socket.close(CloseCode.TRY_AGAIN_LATER, REFUSAL)
            return
        response: Response
        if entry == "twilio":
            response = Response(_TWIML_REFUSAL, media_type="application/xml")
        else:
            response = PlainTextResponse(REFUSAL, status_code=503, headers={"Retry-After": "5"})
        await response(scope, receive, send)

    @staticmethod
    def _entry(scope: Scope) -> str | None:
        kind, path = scope["type"], scope.get("path", "")
        method = scope.get("method") if kind == "http" else "websocket"
        for entry, pattern, wanted in _ENTRIES:
            if method == wanted and pattern.fullmatch(path):
                return entry
        return None
