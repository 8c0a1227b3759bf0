"""Calling the caller back (`[phone] callback = true`) when a result is held after a hang-up.

    POST /twilio/{desk}/callback/{attempt}          Twilio: the call-back was answered
    POST /twilio/{desk}/callback/{attempt}/status   Twilio: how the call-back ended

When the delivery service holds a result of a phone conversation whose caller is gone,
`CallBacks` waits `callback_delay` seconds, then places a call with the REST API
(`calls.create` with answering-machine detection; Twilio fetches our TwiML when the call
is answered). A person who answers gets the same `<Connect><Stream>` as an incoming call,
with a fresh stream token minted then (a phone may ring longer than a token lives), and
the held results are spoken as on any call: exactly once, by the delivery service. An
answering machine gets `<Hangup/>`; no answer, busy or a failed call leave the results held
and another attempt follows, at most `callback_attempts` per result. A caller who rings
back first is not called: the attempt finds nothing held.

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

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from voicehub.core.clock import Clock
from voicehub.core.events import Event
from voicehub.core.hooks import HookContext, HookTrigger
from voicehub.core.store.base import DeliveryStatus
from voicehub.errors import MissingExtraError
from voicehub.server.twilio import PhoneLine, signed_form, stream_twiml

if TYPE_CHECKING:
    from voicehub.desks.desk import Desk
    from voicehub.server.settings import ServerSettings

__all__ = ["CallBacks", "Dialer", "TwilioDialer", "callback_routes"]

log = logging.getLogger("voicehub.twilio")

_RING_SECONDS = 30  # how long Twilio lets the phone ring
_REPORT_TIMEOUT = 300.0  # seconds to wait for Twilio's word on an attempt before moving on
_MAX_NUMBERS = 10_000  # conversations whose numbers are kept for a call-back
_ENDED = frozenset({"busy", "no-answer", "failed", "canceled", "completed"})
_MACHINE = ("machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other", "fax")


class Dialer(Protocol):
    """Places an outbound call whose TwiML Twilio fetches from `url` once answered."""

    async def dial(self, *, to: str, from_: str, url: str, status_callback: str) -> str:
        """The new call's sid (raises when the API refuses the call)."""
        ...


class TwilioDialer:
    """`Dialer` on the `twilio` package's REST client; `api_url` replaces Twilio's own
    address (a proxy, or a fake Twilio in tests)."""

    def __init__(self, account_sid: str, auth_token: str, *, api_url: str | None = None) -> None:
        try:
            from twilio.rest import Client
        except ImportError:
            raise MissingExtraError("twilio", "twilio") from None
        self._client = Client(account_sid, auth_token)
        if api_url is not None:
            self._client.api.base_url = api_url.rstrip("/")

    async def dial(self, *, to: str, from_: str, url: str, status_callback: str) -> str:
        # The client is synchronous (requests); a thread keeps the event loop free.
        call = await asyncio.to_thread(
            self._client.calls.create,
            to=to,
            from_=from_,
            url=url,
            method="POST",
            status_callback=status_callback,
            status_callback_method="POST",
            machine_detection="Enable",  # AnsweredBy arrives with the answer webhook
            timeout=_RING_SECONDS,
        )
        return str(call.sid)


def dialer_from(settings: ServerSettings) -> Dialer | None:
    """The REST dialer the settings allow, or None (call-backs then stay off)."""
    sid, token = settings.twilio_account_sid, settings.twilio_auth_token
    if sid is None or token is None or settings.public_url is None:
        return None
    return TwilioDialer(sid, token, api_url=settings.twilio_api_url)


@dataclass
class _Attempt:
    room_id: str
    desk: str
    conversation: str
    outcome: asyncio.Future[str] = field(repr=False)


@dataclass(frozen=True, slots=True)
class _Numbers:
    caller: str  # the number to call back
    line: str  # the number they called: the call-back comes from it


class CallBacks:
    """Places call-backs for held results of desks with `[phone] callback = true`.

    `history` lists `(room_id, outcome)` per attempt: answered, machine, no-answer, busy,
    failed, canceled, completed (ended before anyone answered), no_report, dial_failed, and
    draining (not placed: the server was shutting down; the results stay held).
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
        for job in list(self._jobs.values()):
            job.cancel()
        await asyncio.gather(*self._jobs.values(), return_exceptions=True)

    # -- Twilio's webhooks -----------------------------------------------------------------

    def answered(self, attempt_id: str, answered_by: str, call_sid: str) -> str:
        """TwiML for an answered call-back: the stream for a person, else hang up."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:  # a restart, or Twilio retried an old webhook
            return _HANG_UP
        machine = answered_by in _MACHINE
        _resolve(attempt, "machine" if machine else "answered")
        if machine:
            return _HANG_UP
        token = self.line.tokens.mint(attempt.desk, attempt.conversation, call_sid)
        return stream_twiml(self.line, attempt.desk, attempt.conversation, token)

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
            outcome = await self._attempt(room_id, desk)
            self.history.append((room_id, outcome))
            self.changed.set()
            log.info("call-back for room %s: %s", room_id, outcome)
            if outcome == "answered":
                return

    async def _attempt(self, room_id: str, desk: Desk) -> str:
        numbers, dialer = self._numbers[room_id], self.dialer
        assert dialer is not None
        attempt_id = secrets.token_urlsafe(16)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        conversation = room_id.split(":", 1)[1]
        self._attempts[attempt_id] = attempt = _Attempt(room_id, desk.name, conversation, future)
        path = f"/twilio/{desk.name}/callback/{attempt_id}"
        try:
            sid = await dialer.dial(
                to=numbers.caller,
                from_=numbers.line,
                url=self.line.public(path),
                status_callback=self.line.public(path + "/status"),
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


_HANG_UP = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup /></Response>'


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
        answered_by = params.get("AnsweredBy", "unknown")
        twiml = callbacks.answered(attempt_id, answered_by, params.get("CallSid", ""))
    return Response(twiml, media_type="application/xml")


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
        Route("/twilio/{desk}/callback/{attempt}/status", callback_status, methods=["POST"]),
    ]
