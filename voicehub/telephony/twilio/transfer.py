"""Transfers and keypad tones on Twilio calls, through the REST API on the call's sid.

Every change waits until the agent has said what happens (its reply to the tool) and that
has played; then:

- cold: the caller's call is redirected to `<Dial>` the target (a number, or `<Sip>`); the
  media stream ends and the agent is off the call. If nobody answers, Twilio asks the
  `<Dial action>` what next: the caller comes back to the agent (a fresh stream), who says
  so and offers to take a message.
- warm: the caller is redirected into a conference of their own, where they hear hold audio
  (`hold_audio`, else the desk's `[voice.sounds] hold` sound: `hold_sound`, else Twilio's
  music), and the person is called (`ring_timeout`, machine
  detection). A person who answers hears the briefing (`<Say>`: the summary, what the caller
  asked, the results held for them) and joins the conference, which then starts: caller and
  person are connected and the agent has left. Nobody answering (no answer, busy, a failed
  call, a voicemail), or no word from Twilio within the ring time and a minute, brings the
  caller back to the agent as above; the person's call is ended if it still rings.
- keypad tones: `<Play digits>`, then a fresh stream to the same conversation.

Each transfer's outcome goes into the conversation (a system event, and the room metadata
list `transfers`), readable in the REST view. Twilio's webhooks for them are served by
`voicehub.telephony.twilio.transfer_routes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape, quoteattr

from voicehub.core.jobs import TaskSet
from voicehub.delivery.policy import Immediate
from voicehub.desks.agent_quiet import until_agent_quiet
from voicehub.desks.held_results import NOTICE_KIND
from voicehub.desks.room_notes import record_transfer
from voicehub.desks.transfer_words import briefing, nobody_line
from voicehub.telephony.twilio.hold_sound import hold_wait
from voicehub.telephony.twilio.rest import TwilioApiError, TwilioRest
from voicehub.telephony.twilio.webhooks import PhoneLine, stream_twiml
from voicehub.tools.call_control import CallControlError, TransferRequest

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.desks.call_lifecycle import LiveCall

__all__ = ["TwilioCallControl", "TwilioTransfers"]

log = logging.getLogger("voicehub.twilio")

_REPORT_SLACK = 60.0  # seconds past the ring time to wait for Twilio's word
_NOBODY = frozenset({"no-answer", "busy", "failed", "canceled"})
_MACHINE = ("machine_start", "machine_end_beep", "machine_end_silence", "machine_end_other")
_CONFERENCE_EVENTS = "start end join leave"


def _twiml(verbs: str) -> str:
    return f'<?xml version="1.0" encoding="UTF-8"?><Response>{verbs}</Response>'


HANG_UP = _twiml("<Hangup />")


@contextlib.asynccontextmanager
async def _leaving(call: LiveCall) -> AsyncIterator[None]:
    """Around the redirect that takes `call` off its stream to a person or to hold: the
    call ends here on purpose (its record `ENDED`), however the stream then ends: with
    Twilio's `stop`, or only its socket closing. A record left open would have the
    take-over (`PhoneTakeover`, after `stream-stopped`) redirect the caller back to the
    agent, off the person. A caller who comes back (nobody answered) does so on a fresh
    stream. A refused redirect leaves the call as it was."""
    marked = call.outcome == "lost" and not call.finished.is_set()
    if marked:
        call.outcome = "hung_up"
    try:
        yield
    except BaseException:
        if marked and not call.finished.is_set():
            call.outcome = "lost"
        raise


@dataclass
class _Transfer:
    id: str
    call: LiveCall
    call_sid: str
    request: TransferRequest
    settled: asyncio.Future[str] = field(repr=False)
    person_sid: str = ""
    briefing: str = ""

    @property
    def conference(self) -> str:
        return f"voicehub-transfer-{self.id}"


class TwilioTransfers:
    """Transfers and keypad tones of this server's Twilio calls (see the module).

    `history` lists `(room_id, outcome)`: connected, no-answer, busy, failed, canceled,
    machine (the person's voicemail), hung-up (the person hung up before joining),
    caller-left, no_report, and api_error (Twilio refused a step; the caller stays with the
    agent, who says so).
    """

    def __init__(self, line: PhoneLine, rest: TwilioRest | None, clock: Clock) -> None:
        self.line, self.rest, self.clock = line, rest, clock
        self.history: list[tuple[str, str]] = []
        self.changed = asyncio.Event()  # set after each outcome (tests wait on it)
        self._transfers: dict[str, _Transfer] = {}
        self._jobs = TaskSet("Twilio transfers")

    def control(self, call: LiveCall, call_sid: str) -> TwilioCallControl:
        """The `CallControl` of one live Twilio call."""
        return TwilioCallControl(self, call, call_sid)

    async def aclose(self) -> None:
        await self._jobs.aclose()

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        self._jobs.start(job, name="transfer")

    # -- starting ----------------------------------------------------------------------------

    def begin(self, call: LiveCall, call_sid: str, request: TransferRequest) -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        transfer = _Transfer(secrets.token_urlsafe(12), call, call_sid, request, future)
        self._transfers[transfer.id] = transfer
        self._spawn(self._run(transfer))

    def send_digits(self, call: LiveCall, call_sid: str, digits: str) -> None:
        self._spawn(self._digits(call, call_sid, digits))

    async def _after_reply(self, call: LiveCall) -> None:
        session = call.session
        if session is not None:
            await until_agent_quiet(session.activity, self.clock)

    async def _run(self, transfer: _Transfer) -> None:
        try:
            await self._after_reply(transfer.call)
            if transfer.request.mode == "cold":
                await self._cold(transfer)
            else:
                await self._warm(transfer)
        except Exception:
            log.exception("room %s: the transfer failed", transfer.call.room_id)
        finally:
            if transfer.request.mode == "warm" or transfer.settled.done():
                self._transfers.pop(transfer.id, None)

    async def _cold(self, transfer: _Transfer) -> None:
        rest, target = self._rest(), transfer.request.target
        path = self._path(transfer, "dialed")
        noun = "Sip" if target.is_sip else "Number"
        timeout = round(transfer.request.ring_timeout)
        dial = (
            f'<Dial action={quoteattr(path)} method="POST" timeout="{timeout}">'
            f"<{noun}>{escape(target.phone or '')}</{noun}></Dial>"
        )
        try:
            async with _leaving(transfer.call):
                await rest.redirect(transfer.call_sid, _twiml(dial))
        except TwilioApiError as exc:
            await self._settle(transfer, "api_error", str(exc))
            await self._tell(transfer, f"Sorry, I could not put you through to {target.name}.")
            return
        log.info("room %s: cold transfer to %s", transfer.call.room_id, target.name)

    async def _warm(self, transfer: _Transfer) -> None:
        rest, request = self._rest(), transfer.request
        target = request.target
        try:
            line_number = await rest.called_number(transfer.call_sid)
            transfer.briefing = await briefing(
                self.line.board.hub.store, transfer.call.desk, transfer.call.room_id, request
            )
            async with _leaving(transfer.call):
                await rest.redirect(transfer.call_sid, _twiml(self._hold(transfer)))
        except TwilioApiError as exc:
            await self._settle(transfer, "api_error", str(exc))
            await self._tell(transfer, f"Sorry, I could not put you through to {target.name}.")
            return
        try:
            transfer.person_sid = await rest.dial(
                to=target.phone or "",
                from_=line_number,
                url=self._path(transfer, "person"),
                status_callback=self._path(transfer, "person/status"),
                machine_detection="Enable",  # a voicemail is not briefed
                timeout=request.ring_timeout,
            )
        except TwilioApiError as exc:
            self._resolve(transfer, "api_error")
            log.warning("room %s: could not call %s: %s", transfer.call.room_id, target.name, exc)
        timer = asyncio.ensure_future(self._give_up(transfer))
        try:
            outcome = await transfer.settled
        finally:
            timer.cancel()
        await self._record(transfer, outcome)
        if outcome == "connected":
            return
        if transfer.person_sid:
            with contextlib.suppress(TwilioApiError):  # it may have ended already
                await rest.hang_up(transfer.person_sid)
        if outcome != "caller-left":
            await self._back_to_agent(transfer, outcome)

    async def _give_up(self, transfer: _Transfer) -> None:
        await self.clock.sleep(transfer.request.ring_timeout + _REPORT_SLACK)
        self._resolve(transfer, "no_report")

    def _hold(self, transfer: _Transfer) -> str:
        found = hold_wait(self.line, transfer.call.desk, transfer.request.hold_audio)
        wait = f" waitUrl={quoteattr(found[0])} waitMethod={quoteattr(found[1])}" if found else ""
        return (
            '<Dial><Conference startConferenceOnEnter="false" endConferenceOnExit="true" '
            f'beep="false"{wait} statusCallback={quoteattr(self._path(transfer, "conference"))} '
            f'statusCallbackEvent="{_CONFERENCE_EVENTS}">{transfer.conference}</Conference></Dial>'
        )

    async def _digits(self, call: LiveCall, call_sid: str, digits: str) -> None:
        await self._after_reply(call)
        token = self.line.tokens.mint(call.desk.name, call.conversation, call_sid)
        stream = stream_twiml(self.line, call.desk.name, call.conversation, token)
        body = stream.split("<Response>", 1)[1].rsplit("</Response>", 1)[0]
        try:
            await self._rest().redirect(
                call_sid, _twiml(f"<Play digits={quoteattr(digits)} />{body}")
            )
            log.info("room %s: sent %d keypad tones", call.room_id, len(digits))
        except TwilioApiError as exc:
            log.warning("room %s: keypad tones not sent: %s", call.room_id, exc)

    # -- coming back -------------------------------------------------------------------------

    async def _back_to_agent(self, transfer: _Transfer, outcome: str) -> None:
        """Redirect the caller from hold to a fresh stream, where the agent tells them."""
        call = transfer.call
        try:
            await self._rest().redirect(transfer.call_sid, self._stream(transfer))
        except TwilioApiError as exc:  # the caller hung up on hold
            log.info("room %s: the caller is gone: %s", call.room_id, exc)
            return
        await self._tell(transfer, nobody_line(transfer.request.target.name, outcome))

    def _stream(self, transfer: _Transfer) -> str:
        call = transfer.call
        token = self.line.tokens.mint(call.desk.name, call.conversation, transfer.call_sid)
        return stream_twiml(self.line, call.desk.name, call.conversation, token)

    async def _tell(self, transfer: _Transfer, text: str) -> None:
        """The agent says `text` on the caller's (next) stream, at once."""
        await self.line.board.hub.delivery.deliver(
            transfer.call.room_id,
            text,
            strategy=Immediate(),
            metadata={"kind": NOTICE_KIND, "transfer": transfer.id},
        )

    # -- outcomes ----------------------------------------------------------------------------

    def _resolve(self, transfer: _Transfer, outcome: str) -> None:
        if not transfer.settled.done():
            transfer.settled.set_result(outcome)

    async def _settle(self, transfer: _Transfer, outcome: str, detail: str = "") -> None:
        self._resolve(transfer, outcome)
        await self._record(transfer, outcome, detail)

    async def _record(self, transfer: _Transfer, outcome: str, detail: str = "") -> None:
        request, call, board = transfer.request, transfer.call, self.line.board
        target = request.target.name
        log.info("room %s: %s transfer to %s: %s", call.room_id, request.mode, target, outcome)
        await record_transfer(
            board.hub,
            call.desk,
            call.room_id,
            request,
            outcome,
            detail=detail,
            live=lambda room_id: room_id in board.calls,
            id=transfer.id,
        )
        self.history.append((call.room_id, outcome))
        self.changed.set()

    # -- Twilio's webhooks -------------------------------------------------------------------

    def person_answered(self, transfer_id: str, answered_by: str) -> str:
        transfer = self._transfers.get(transfer_id)
        if transfer is None or transfer.settled.done():
            return HANG_UP
        if answered_by in _MACHINE or answered_by == "fax":
            self._resolve(transfer, "machine")
            return HANG_UP
        join = (
            '<Dial><Conference startConferenceOnEnter="true" endConferenceOnExit="true" '
            f'beep="false">{transfer.conference}</Conference></Dial>'
        )
        return _twiml(f"<Say>{escape(transfer.briefing)}</Say>{join}")

    def person_reported(self, transfer_id: str, status: str) -> None:
        transfer = self._transfers.get(transfer_id)
        if transfer is None:
            return
        if status in _NOBODY:
            self._resolve(transfer, status)
        elif status == "completed":  # ended without the conference starting
            self._resolve(transfer, "hung-up")

    def conference_event(self, transfer_id: str, event: str, call_sid: str) -> None:
        transfer = self._transfers.get(transfer_id)
        if transfer is None:
            return
        if event == "conference-start":
            self._resolve(transfer, "connected")
        elif event == "participant-leave" and call_sid == transfer.call_sid:
            self._resolve(transfer, "caller-left")

    async def dialed(self, transfer_id: str, status: str) -> str:
        """A cold transfer's dial ended: hang up after a bridged call, else the agent."""
        transfer = self._transfers.pop(transfer_id, None)
        if transfer is None:
            return HANG_UP
        outcome = "connected" if status in ("completed", "answered") else status
        await self._settle(transfer, outcome)
        if outcome == "connected":
            return HANG_UP
        await self._tell(transfer, nobody_line(transfer.request.target.name, outcome))
        return self._stream(transfer)

    # -- plumbing ----------------------------------------------------------------------------

    def _rest(self) -> TwilioRest:
        if self.rest is None:
            raise CallControlError(NOT_SET_UP)
        return self.rest

    def _path(self, transfer: _Transfer, end: str) -> str:
        return self.line.public(f"/twilio/{transfer.call.desk.name}/transfer/{transfer.id}/{end}")


NOT_SET_UP = (
    "transfers on phone calls need TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN and "
    "VOICEHUB_PUBLIC_URL on the server."
)


class TwilioCallControl:
    """`CallControl` for one Twilio call: the REST API on its sid."""

    kind = "twilio"

    def __init__(self, transfers: TwilioTransfers, call: LiveCall, call_sid: str) -> None:
        self.transfers, self.call, self.call_sid = transfers, call, call_sid

    async def transfer(self, request: TransferRequest) -> str:
        target = request.target
        if target.phone is None:
            raise CallControlError(
                f"{target.name} takes only browser callers (it is the {target.desk} desk)."
            )
        if self.transfers.rest is None:
            raise CallControlError(NOT_SET_UP)
        self.transfers.begin(self.call, self.call_sid, request)
        if request.mode == "cold":
            return f"I'm putting you through to {target.name} now."
        return f"Please hold while I call {target.name} for you."

    async def send_digits(self, digits: str) -> str:
        if any(d in "ABCD" for d in digits):
            raise CallControlError("this phone line cannot send the keys A to D.")
        if self.transfers.rest is None:
            raise CallControlError(NOT_SET_UP)
        self.transfers.send_digits(self.call, self.call_sid, digits)
        return f"Pressing {' '.join(d for d in digits if d != 'w')}."
