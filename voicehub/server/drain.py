"""Draining: stop taking calls, hand the live ones over, then let the process exit.

`voicehub serve` starts a drain on SIGTERM (what a load balancer's orchestrator sends):

1. `/ready` answers 503 at once, so the balancer stops sending calls here;
2. new calls are refused with a clear reason (`voicehub.server.entry_gate`): a WebSocket
   call gets an error frame and close code 1013 (try again later), a WebRTC offer 503 with
   Retry-After, a Twilio webhook TwiML that tells the caller and hangs up; a call coming
   back (Twilio's redirect with `resume=1`) is not a new call and is let through;
3. when another instance is alive (`peers`), each live call is handed over at its next
   quiet moment (the caller and the agent silent, nothing being spoken; at most
   `HANDOVER_WAIT` seconds after the drain began, or when a result is being spoken then,
   once it ended, by the drain's deadline at the latest): its record says so and its line is
   closed the way that brings the caller back through the balancer to another instance,
   which goes on without a word (a WebSocket client reconnects on 1012, Twilio follows
   the TwiML's redirect, WebRTC re-offers); from then on no result starts being spoken
   here (it would be cut): it is held with its call and spoken by the next instance;
4. background tasks go on until they are done or `seconds` pass (their results reach
   the caller wherever the call went on); calls still live then (no other instance) are
   handed over as at any shutdown, their results held in the outbox;
5. `on_done` runs (the server then shuts down and the process exits 0).

A second SIGTERM (or Ctrl-C) stops at once, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from voicehub.core.clock import wait_or_sleep
from voicehub.core.hooks import HookContext, HookTrigger

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.events import Event
    from voicehub.server.calls import LiveCall, Switchboard
    from voicehub.voice.activity import ActivitySnapshot
    from voicehub.voice.transport import CallTransport

__all__ = ["REFUSAL", "Drain"]

log = logging.getLogger("voicehub.server")

REFUSAL = "this server is shutting down and takes no new calls; call again in a moment"
HANDOVER_WAIT = 10.0
"""Seconds a live call may keep the drain waiting for a quiet moment to be handed over
(a result being spoken then may go on to its end, up to the drain's deadline)."""
_QUIET_POLL = 0.05  # seconds between looks for a quiet moment


class Drain:
    """The drain state of one app: started once, watched by `/ready` and the entry gate.

    It follows `board`'s calls (a `CallObserver`: the server subscribes it) and tasks;
    `hang_up` end the calls left at the deadline (after the switchboard's own `close_all`,
    which hands them over). `peers()` says whether another instance is alive to take the
    calls over now."""

    def __init__(
        self,
        clock: Clock,
        seconds: float,
        board: Switchboard,
        hang_up: Sequence[Callable[[], Awaitable[None]]] = (),
        peers: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.clock = clock
        self.seconds = seconds
        self.draining = False
        self._board = board
        self._hang_up = [board.close_all, *hang_up]
        self._peers = peers
        self.handed_over = 0  # calls handed over to other instances
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
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
        return bool(board.calls or board.hub.tasks.live)

    async def _run(self, on_done: Callable[[], None] | None) -> None:
        deadline = self.clock.now() + self.seconds
        try:
            await self._hand_over(deadline)
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

    async def _hand_over(self, deadline: float) -> None:
        """Hand each live call over at its next quiet moment, if an instance can take it."""
        board = self._board
        if not board.calls or self._peers is None:
            return
        try:
            if not await self._peers():
                log.info("draining: no other instance to hand the calls to")
                return
        except Exception:
            log.exception("draining: could not tell whether other instances are alive")
            return
        # From now on every call here is handed over: a result started here would be cut
        delivery = board.hub.delivery
        delivery.hand_over_results()
        latest = min(deadline, self.clock.now() + HANDOVER_WAIT)
        handed: list[LiveCall] = []  # held here, so that no call is taken for another
        while True:
            now = self.clock.now()
            waiting = False
            for call in list(board.calls.values()):
                if any(call is done for done in handed):
                    continue
                session = call.session
                # a result being spoken is let end (no other starts): cut, it would be
                # spoken again from its start by the next instance
                result = delivery.speaking(call.room_id)
                quiet = (
                    session is not None
                    and (call.saying is None or call.saying.done())  # an apology, say
                    and _quiet(session.activity.snapshot())
                    and not result
                )
                if quiet or (now >= latest and not result) or now >= deadline:
                    handed.append(call)
                    self.handed_over += 1
                    await board.lifecycle.hand_over(call)
                else:
                    waiting = True
            if not waiting or now >= deadline:
                return
            await self.clock.sleep(_QUIET_POLL)

    # -- what it watches -----------------------------------------------------------------

    def call_started(self, call: LiveCall, transport: CallTransport) -> CallTransport:
        return transport

    def call_accepted(self, call: LiveCall) -> None:
        return None

    def call_ended(self, call: LiveCall) -> None:
        self._changed.set()

    async def _task_completed(self, event: Event, context: HookContext) -> None:
        self._changed.set()


def _quiet(snapshot: ActivitySnapshot) -> bool:
    """A moment to hand a call over without the caller noticing: nobody speaks, nothing is
    about to be said or still playing."""
    return snapshot.is_idle
