"""Calling the caller back (`[phone] callback = true`) when a result is held after a hang-up.

    POST /twilio/{desk}/callback/{attempt}          Twilio: the call-back was answered
    POST /twilio/{desk}/callback/{attempt}/amd      Twilio: who answered (asynchronous AMD)
    POST /twilio/{desk}/callback/{attempt}/status   Twilio: how the call-back ended

When the delivery service holds a result of a phone conversation whose caller is gone,
`CallBacks` waits `callback_delay` seconds, then places a call with the REST API
(`calls.create` with asynchronous answering-machine detection that waits for the end of a
machine's greeting, `DetectMessageEnd`). The answered call pauses while detection runs;
its verdict then redirects the call. A person (or an unsure verdict) gets the same
`<Connect><Stream>` as an incoming call, with a fresh stream token minted then (a phone may
ring longer than a token lives), and the held results are spoken as on any call: exactly
once, by the delivery service. An answering machine, at its beep, gets the desk's
`voicemail` (`<Say>`, then `<Hangup/>`): left once, the results stay held and that result
set is not called back again. No answer, busy or a failed call leave the results held and
another attempt follows, at most `callback_attempts` per result. A caller who rings back
first is not called: the attempt finds nothing held.

The caller's number is kept in memory only (the store never holds it): after a restart,
held results wait for the caller to call in.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from xml.sax.saxutils import escape as xml_escape

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from voicehub.core.clock import Clock
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.store.base import DeliveryStatus
from voicehub.desks.held_results import held_for_caller, topics_of, topics_phrase
from voicehub.telephony.twilio.rest import TwilioRest
from voicehub.telephony.twilio.webhooks import PhoneLine, signed_form, stream_twiml

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.telephony.line import PhoneSettings

__all__ = ["CallBacks", "Dialer", "TwilioDialer", "callback_routes", "dialer_from"]

log = logging.getLogger("voicehub.twilio")

_REPORT_TIMEOUT = 300.0  # seconds to wait for Twilio's word on an attempt before moving on
_MAX_NUMBERS = 10_000  # conversations whose numbers are kept for a call-back
_ENDED = frozenset({"busy", "no-answer", "failed", "canceled", "completed"})
_MACHINE = ("machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other")
_DETECTING = 60  # seconds a call-back waits, silent, for detection's verdict


class Dialer(Protocol):
    """What call-backs need of Twilio's REST API (`TwilioRest`)."""

    async def dial(
        self,
        *,
        to: str,
        from_: str,
        url: str,
        status_callback: str,
        machine_detection: str = "Enable",
        async_amd_callback: str | None = None,
        timeout: float = 30,
    ) -> str:
        """The new call's sid (raises when the API refuses the call)."""
        ...

    async def redirect(self, call_sid: str, twiml: str) -> None:
        """Make the live call run `twiml` now."""
        ...


TwilioDialer = TwilioRest  # the REST client places call-backs


def dialer_from(settings: PhoneSettings) -> TwilioRest | None:
    """The REST client the settings allow, or None (call-backs then stay off)."""
    sid, token = settings.twilio_account_sid, settings.twilio_auth_token
    if sid is None or token is None or settings.public_url is None:
        return None
    return TwilioRest(sid, token, api_url=settings.twilio_api_url)


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
        dialer: Dialer | None,
        clock: Clock,
        draining: Callable[[], bool] = lambda: False,
    ) -> None:
        self.line, self.dialer, self.clock = line, dialer, clock
        # A draining server refuses the stream a call-back would open: it does not dial, and
        # the results stay held for the caller's next call.
        self.draining = draining
        self.history: list[tuple[str, str]] = []
        self.changed = asyncio.Event()  # set after each attempt (tests wait on it)
        self._numbers: dict[str, _Numbers] = {}
        self._tries: defaultdict[str, int] = defaultdict(int)  # delivery id -> calls placed
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._attempts: dict[str, _Attempt] = {}
        self._redirects: set[asyncio.Task[None]] = set()
        line.board.hub.hooks.add(HookTrigger.AFTER_DELIVER, self._on_delivery, name="callbacks")
        wanted = [d.name for d in line.board.desks.values() if d.config.phone.callback]
        if wanted and dialer is None:
            log.warning(
                "desks %s ask for call-backs, which need TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN "
                "and VOICEHUB_PUBLIC_URL: no call-backs will be placed",
                ", ".join(wanted),
            )

    def remember(self, room_id: str, caller: str, line: str) -> None:
        """The numbers of an incoming call to `room_id` (memory only, and only for desks
        that call back; the most recent `_MAX_NUMBERS` conversations)."""
        desk = self.line.board.desks.get(room_id.split(":", 1)[0])
        if desk is None or not desk.config.phone.callback:
            return
        self._numbers.pop(room_id, None)
        self._numbers[room_id] = _Numbers(caller, line)
        if len(self._numbers) > _MAX_NUMBERS:
            del self._numbers[next(iter(self._numbers))]

    def knows(self, room_id: str) -> bool:
        """Whether the number to call back for `room_id` is known."""
        return room_id in self._numbers

    async def aclose(self) -> None:
        for job in [*self._jobs.values(), *self._redirects]:
            job.cancel()
        await asyncio.gather(*self._jobs.values(), *self._redirects, return_exceptions=True)

    # -- Twilio's webhooks -----------------------------------------------------------------

    def answered(self, attempt_id: str, answered_by: str, call_sid: str) -> str:
        """TwiML for an answered call-back. Detection runs alongside (asynchronous): the call
        waits, silent, for its verdict (`detected`). A verdict already given (synchronous
        detection) is acted on at once."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:  # a restart, or Twilio retried an old webhook
            return _HANG_UP
        if answered_by:
            return self._verdict(attempt, answered_by, call_sid)
        return _twiml(f'<Pause length="{_DETECTING}" />')

    def detected(self, attempt_id: str, answered_by: str, call_sid: str) -> None:
        """Detection's verdict on an answered call-back: redirect the call to what it
        calls for (the stream, the voicemail, or hanging up)."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.verdict or self.dialer is None:
            return
        twiml = self._verdict(attempt, answered_by, call_sid)
        task = asyncio.create_task(self._redirect(self.dialer, call_sid, twiml, attempt))
        self._redirects.add(task)
        task.add_done_callback(self._redirects.discard)

    async def _redirect(self, dialer: Dialer, call_sid: str, twiml: str, attempt: _Attempt) -> None:
        try:
            await dialer.redirect(call_sid, twiml)
        except Exception as exc:  # the callee hung up meanwhile: the status report settles it
            log.info("call-back for room %s: could not redirect it: %s", attempt.room_id, exc)

    def _verdict(self, attempt: _Attempt, answered_by: str, call_sid: str) -> str:
        """The TwiML for who answered, and the attempt's outcome."""
        attempt.verdict = answered_by or "unknown"
        if answered_by == "fax":
            _resolve(attempt, "machine")
            return _HANG_UP
        if answered_by in _MACHINE:
            message = self._voicemail(attempt)
            _resolve(attempt, "voicemail" if message else "machine")
            if not message:
                return _HANG_UP
            return _twiml(f"<Say>{xml_escape(message)}</Say><Hangup />")
        _resolve(attempt, "answered")  # a person, or detection unsure: the stream
        token = self.line.tokens.mint(attempt.desk, attempt.conversation, call_sid)
        return stream_twiml(self.line, attempt.desk, attempt.conversation, token)

    def _voicemail(self, attempt: _Attempt) -> str:
        """The desk's voicemail about the held results ("" when the desk leaves none)."""
        desk = self.line.board.desks.get(attempt.desk)
        if desk is None or not desk.config.phone.voicemail:
            return ""
        records = self.line.board.hub.delivery.pending(attempt.room_id)
        held = [r for r in held_for_caller(records) if r.id in attempt.deliveries]
        topics = topics_phrase(topics_of(held or held_for_caller(records)))
        return desk.config.phone.voicemail.format(desk=desk.title, topics=topics)

    def reported(self, attempt_id: str, status: str) -> None:
        """A status callback: an ended call settles an attempt nobody answered."""
        attempt = self._attempts.get(attempt_id)
        if attempt is not None and status in _ENDED:
            _resolve(attempt, status)

    # -- placing calls ---------------------------------------------------------------------

    async def _on_delivery(self, event: Event, context: HookContext) -> None:
        room_id = event.room_id
        if event.metadata.get("outcome") != "held" or "::" in room_id:
            return
        desk = self.line.board.desks.get(room_id.split(":", 1)[0])
        if desk is None or not desk.config.phone.callback or self.dialer is None:
            return
        if room_id not in self._numbers or room_id in self._jobs:
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
        numbers, dialer = self._numbers[room_id], self.dialer
        assert dialer is not None
        attempt_id = secrets.token_urlsafe(16)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        conversation = room_id.split(":", 1)[1]
        attempt = _Attempt(room_id, desk.name, conversation, future, held)
        self._attempts[attempt_id] = attempt
        path = f"/twilio/{desk.name}/callback/{attempt_id}"
        try:
            sid = await dialer.dial(
                to=numbers.caller,
                from_=numbers.line,
                url=self.line.public(path),
                status_callback=self.line.public(path + "/status"),
                machine_detection="DetectMessageEnd",  # a machine's verdict at its beep
                async_amd_callback=self.line.public(path + "/amd"),
            )
            log.info("call-back for room %s: placed call %s", room_id, sid)
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


def _twiml(verbs: str) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?><Response>{verbs}</Response>'


_HANG_UP = _twiml("<Hangup />")


def _callbacks(request: Request) -> CallBacks | None:
    return getattr(request.app.state, "callbacks", None)


async def callback_answer(request: Request) -> Response:
    """Twilio fetches the TwiML of an answered call-back (AnsweredBy from its detection)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    attempt_id = request.path_params["attempt"]
    twiml = _HANG_UP
    if callbacks is not None:
        answered_by = params.get("AnsweredBy", "")
        twiml = callbacks.answered(attempt_id, answered_by, params.get("CallSid", ""))
    return Response(twiml, media_type="application/xml")


async def callback_detected(request: Request) -> Response:
    """Asynchronous detection's verdict on an answered call-back (AnsweredBy)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    if callbacks is not None:
        attempt_id = request.path_params["attempt"]
        callbacks.detected(
            attempt_id, params.get("AnsweredBy", "unknown"), params.get("CallSid", "")
        )
    return Response(status_code=204)


async def callback_status(request: Request) -> Response:
    """How a call-back ended (no-answer, busy, failed, completed...)."""
    signed = await signed_form(request)
    if isinstance(signed, Response):
        return signed
    _, params = signed
    callbacks = _callbacks(request)
    if callbacks is not None:
        callbacks.reported(request.path_params["attempt"], params.get("CallStatus", ""))
    return Response(status_code=204)


def callback_routes() -> list[BaseRoute]:
    return [
        Route("/twilio/{desk}/callback/{attempt}", callback_answer, methods=["POST"]),
        Route("/twilio/{desk}/callback/{attempt}/amd", callback_detected, methods=["POST"]),
        Route("/twilio/{desk}/callback/{attempt}/status", callback_status, methods=["POST"]),
    ]
