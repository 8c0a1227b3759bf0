"""Calling the caller back (`[phone] callback = true`) when a result is held after a hang-up,
on whichever carrier the caller called through.

When the delivery service holds a result of a phone conversation whose caller is gone,
`CallBacks` waits `callback_delay` seconds, then has the carrier the caller came in on place
a call from the number they called (`CallBackDialer.dial_back`: Twilio's REST API in
`voicehub.telephony.twilio.callback`; Telnyx, Plivo and Vonage through their call control),
with answering-machine detection. The carrier's webhooks then ask what to do with the
answered call (`answered`, `detected`) and get an `Answer`, which each renders in its own
language: a person (or an unsure verdict) gets the same stream as an incoming call, with a
fresh stream token minted then (a phone may ring longer than a token lives), and the held
results are spoken as on any call: exactly once, by the delivery service. An answering
machine gets the desk's `voicemail`, then a hang-up: left once, the results stay held and
that result set is not called back again. No answer, busy or a failed call (`reported`)
leave the results held and another attempt follows, at most `callback_attempts` per result.
A caller who rings back first is not called: the attempt finds nothing held.

The caller's number is kept in memory only (the store never holds it): after a restart,
held results wait for the caller to call in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.clock import Clock
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import DeliveryStatus
from voicehub.desks.held_results import held_for_caller, topics_of, topics_phrase

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.telephony.line import PhoneLine

__all__ = [
    "ENDED",
    "MACHINE",
    "Answer",
    "AwaitDetection",
    "CallBackDialer",
    "CallBacks",
    "ConnectStream",
    "DialBack",
    "HangUp",
    "LeaveVoicemail",
]

log = logging.getLogger("voicehub.telephony")

_REPORT_TIMEOUT = 300.0  # seconds to wait for the carrier's word on an attempt before moving on
_MAX_NUMBERS = 10_000  # conversations whose numbers are kept for a call-back
# How an attempt nobody answered ended, in Twilio's words (the other carriers' map to them).
ENDED = frozenset({"busy", "no-answer", "failed", "canceled", "completed"})
# Answering-machine verdicts (Twilio's `AnsweredBy` values, which Telnyx's TeXML shares).
MACHINE = frozenset(
    {"machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other"}
)


@dataclass(frozen=True, slots=True)
class DialBack:
    """A call-back to place: its attempt (in the URLs of its webhooks), the desk, the numbers."""

    attempt_id: str
    desk: str
    to: str  # the caller
    from_: str  # the number they called


class CallBackDialer(Protocol):
    """A carrier's way to place a call-back (raises when its API refuses the call)."""

    async def dial_back(self, call: DialBack) -> str:
        """Place the call, with answering-machine detection; its call id."""
        ...


@dataclass(frozen=True, slots=True)
class HangUp:
    """End the call (an unknown attempt, a fax, a machine with no voicemail to leave)."""


@dataclass(frozen=True, slots=True)
class LeaveVoicemail:
    """Say `text` to the answering machine, then hang up."""

    text: str


@dataclass(frozen=True, slots=True)
class ConnectStream:
    """Connect the call to the desk's media stream, as an incoming call of `conversation`."""

    desk: str
    conversation: str
    token: str


@dataclass(frozen=True, slots=True)
class AwaitDetection:
    """Keep the call waiting, silent, for detection's verdict (asynchronous detection)."""

    seconds: int = 60


Answer = HangUp | LeaveVoicemail | ConnectStream | AwaitDetection


@dataclass
class _Attempt:
    room_id: str
    desk: str
    conversation: str
    outcome: asyncio.Future[str] = field(repr=False)
    deliveries: tuple[str, ...] = ()  # the held results it calls about
    verdict: str = ""  # who answered, once detection said


@dataclass(frozen=True, slots=True)
class _Numbers:
    caller: str  # the number to call back
    line: str  # the number they called: the call-back comes from it
    carrier: str  # the carrier they called through: it places the call-back


class CallBacks:
    """Places call-backs for held results of desks with `[phone] callback = true`.

    `history` lists `(room_id, outcome)` per attempt: answered, voicemail (a machine: the
    message left), machine (a machine or fax, no message), no-answer, busy, failed,
    canceled, completed (ended before anyone answered), no_report, dial_failed, and draining
    (not placed: the server was shutting down; the results stay held).
    """

    def __init__(
        self,
        line: PhoneLine,
        dialers: Mapping[str, CallBackDialer],
        clock: Clock,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.line, self.dialers, self.clock = line, dict(dialers), clock
        # A draining server refuses the stream a call-back would open: it does not dial, and
        # the results stay held for the caller's next call.
        self.draining = draining
        self.history: list[tuple[str, str]] = []
        self.changed = asyncio.Event()  # set after each attempt (tests wait on it)
        self._numbers: dict[str, _Numbers] = {}
        self._tries: defaultdict[str, int] = defaultdict(int)  # delivery id -> calls placed
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._attempts: dict[str, _Attempt] = {}
        self._background = TaskSet("call-back webhooks")
        line.board.hub.hooks.add(HookTrigger.AFTER_DELIVER, self._on_delivery, name="callbacks")
        wanted = [d.name for d in line.board.desks.values() if d.config.phone.callback]
        if wanted and not self.dialers:
            log.warning(
                "desks %s ask for call-backs, which need a carrier's REST API (Twilio's "
                "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, or docs/carriers.md) and "
                "VOICEHUB_PUBLIC_URL: no call-backs will be placed",
                ", ".join(wanted),
            )

    def remember(self, room_id: str, caller: str, line: str, carrier: str = "twilio") -> None:
        """The numbers of an incoming call to `room_id` through `carrier` (memory only, and
        only for desks that call back; the most recent `_MAX_NUMBERS` conversations)."""
        desk = self.line.board.desks.get(room_id.split(":", 1)[0])
        if desk is None or not desk.config.phone.callback:
            return
        self._numbers.pop(room_id, None)
        self._numbers[room_id] = _Numbers(caller, line, carrier)
        if len(self._numbers) > _MAX_NUMBERS:
            del self._numbers[next(iter(self._numbers))]

    def knows(self, room_id: str) -> bool:
        """Whether the number to call back for `room_id` is known."""
        return room_id in self._numbers

    def background(self, job: Coroutine[Any, Any, None]) -> None:
        """Run `job` (a webhook's follow-up the carrier must not wait for) until `aclose`."""
        self._background.start(job, name="webhook follow-up")

    async def aclose(self) -> None:
        jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        await self._background.aclose()

    # -- the carrier's webhooks ------------------------------------------------------------

    def answered(self, attempt_id: str, answered_by: str, call_id: str) -> Answer:
        """What to do with an answered call-back. `answered_by` is detection's verdict when
        the carrier gives it with the answer; without one the call waits for `detected`."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:  # a restart, or the carrier retried an old webhook
            return HangUp()
        if answered_by:
            return self._verdict(attempt, answered_by, call_id)
        return AwaitDetection()

    def detected(self, attempt_id: str, answered_by: str, call_id: str) -> Answer | None:
        """Detection's verdict on a call-back waiting for it: what the call should do now
        (None: nothing, the attempt is unknown or was decided already)."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.verdict:
            return None
        return self._verdict(attempt, answered_by, call_id)

    def reported(self, attempt_id: str, status: str) -> None:
        """How a call-back ended (one of `ENDED`, or "machine": the carrier's detection hung
        up on one): it settles an attempt nobody answered."""
        attempt = self._attempts.get(attempt_id)
        if attempt is not None and (status in ENDED or status == "machine"):
            _resolve(attempt, status)

    def _verdict(self, attempt: _Attempt, answered_by: str, call_id: str) -> Answer:
        """The answer for who answered, and the attempt's outcome."""
        attempt.verdict = answered_by or "unknown"
        if answered_by == "fax":
            _resolve(attempt, "machine")
            return HangUp()
        if answered_by in MACHINE:
            message = self._voicemail(attempt)
            _resolve(attempt, "voicemail" if message else "machine")
            return LeaveVoicemail(message) if message else HangUp()
        _resolve(attempt, "answered")  # a person, or detection unsure: the stream
        token = self.line.tokens.mint(attempt.desk, attempt.conversation, call_id)
        return ConnectStream(attempt.desk, attempt.conversation, token)

    def _voicemail(self, attempt: _Attempt) -> str:
        """The desk's voicemail about the held results ("" when the desk leaves none)."""
        desk = self.line.board.desks.get(attempt.desk)
        if desk is None or not desk.config.phone.voicemail:
            return ""
        records = self.line.board.hub.delivery.pending(attempt.room_id)
        held = [r for r in held_for_caller(records) if r.id in attempt.deliveries]
        topics = topics_phrase(topics_of(held or held_for_caller(records)))
        return desk.config.phone.voicemail.format(desk=desk.title, topics=topics)

    # -- placing calls ---------------------------------------------------------------------

    async def _on_delivery(self, event: Event, context: HookContext) -> None:
        room_id = event.room_id
        if event.metadata.get("outcome") != "held" or "::" in room_id:
            return
        desk = self.line.board.desks.get(room_id.split(":", 1)[0])
        numbers = self._numbers.get(room_id)
        if desk is None or not desk.config.phone.callback or numbers is None:
            return
        if numbers.carrier not in self.dialers or room_id in self._jobs:
            return
        if (
            self._tries[str(event.metadata.get("delivery_id"))]
            >= desk.config.phone.callback_attempts
        ):
            return
        self._jobs[room_id] = job = asyncio.create_task(self._run(room_id, desk))
        job.add_done_callback(lambda _: self._jobs.pop(room_id, None))

    async def _run(self, room_id: str, desk: Desk) -> None:
        phone = desk.config.phone
        while True:
            await self.clock.sleep(phone.callback_delay)
            board = self.line.board
            while (call := board.calls.get(room_id)) is not None:  # the caller is (still) on
                await call.finished.wait()
            held = [
                r.id
                for r in board.hub.delivery.pending(room_id)
                if r.status is DeliveryStatus.HELD and self._tries[r.id] < phone.callback_attempts
            ]
            if not held:
                return
            if self.draining():
                log.info("call-back for room %s not placed: the server is draining", room_id)
                self.history.append((room_id, "draining"))
                self.changed.set()
                return
            for delivery_id in held:
                self._tries[delivery_id] += 1
            outcome = await self._attempt(room_id, desk, tuple(held))
            if outcome == "voicemail":  # the message is left once: no more calls for these
                for delivery_id in held:
                    self._tries[delivery_id] = phone.callback_attempts
            self.history.append((room_id, outcome))
            self.changed.set()
            log.info("call-back for room %s: %s", room_id, outcome)
            if outcome in ("answered", "voicemail"):
                return

    async def _attempt(self, room_id: str, desk: Desk, held: tuple[str, ...]) -> str:
        numbers = self._numbers[room_id]
        dialer = self.dialers[numbers.carrier]
        attempt_id = secrets.token_urlsafe(16)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        conversation = room_id.split(":", 1)[1]
        attempt = _Attempt(room_id, desk.name, conversation, future, held)
        self._attempts[attempt_id] = attempt
        try:
            call_id = await dialer.dial_back(
                DialBack(attempt_id, desk.name, numbers.caller, numbers.line)
            )
            log.info("call-back for room %s: placed %s call %s", room_id, numbers.carrier, call_id)
        except Exception as exc:  # the API refused: the results stay held
            log.warning("call-back for room %s could not be placed: %s", room_id, exc)
            del self._attempts[attempt_id]
            return "dial_failed"
        timer = asyncio.create_task(self._give_up(attempt))
        try:
            return await future
        finally:
            timer.cancel()
            del self._attempts[attempt_id]

    async def _give_up(self, attempt: _Attempt) -> None:
        await self.clock.sleep(_REPORT_TIMEOUT)
        _resolve(attempt, "no_report")


def _resolve(attempt: _Attempt, outcome: str) -> None:
    if not attempt.outcome.done():
        attempt.outcome.set_result(outcome)
