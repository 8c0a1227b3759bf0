"""Transfers and keypad tones for phone callers brought in by LiveKit SIP, through livekit's
SIP API (the `livekit-api` client the worker already has).

Once the agent has said what happens (its reply played):

- cold: `TransferSIPParticipant` (a SIP REFER) hands the caller's call to the target; the
  caller leaves the room and the agent's part ends.
- warm: `CreateSIPParticipant` calls the person into the caller's room through the desk's
  outbound trunk (`[transfer] sip_trunk`), waiting until they answer (`ring_timeout`), the
  room hearing a dial tone meanwhile. The agent then briefs the person (the caller hears it
  too: a warm introduction), and leaves the two to talk.
- nobody answering (a SIP error: busy, no answer): the caller stays with the agent, who says
  so and offers to take a message.
- keypad tones: livekit's SIP DTMF, one digit after the other, published in the room.

Browser and app participants of a LiveKit room have no phone line: their transfers are
refused with the reason (the server's desk handoff is for its own WebSocket and WebRTC calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from voicehub.core.jobs import TaskSet
from voicehub.delivery.policy import Immediate
from voicehub.desks.agent_quiet import until_agent_quiet
from voicehub.desks.held_results import NOTICE_KIND
from voicehub.desks.room_notes import record_transfer
from voicehub.desks.transfer_words import briefing, nobody_line
from voicehub.tools.call_control import CallControlError, TransferRequest
from voicehub.voice.providers import vendor_import

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.desks.desk import Desk
    from voicehub.hub import Hub
    from voicehub.voice.session import VoiceSession


class Caller(Protocol):
    """A room participant as the worker sees it (`voicehub.workers.job.Caller`)."""

    @property
    def identity(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def phone_number(self) -> str: ...

    @property
    def call_id(self) -> str: ...


__all__ = ["TRANSFER_IDENTITY", "SipAccess", "SipCallControl", "SipControls", "dtmf_code"]

log = logging.getLogger("voicehub.telephony")

TRANSFER_IDENTITY = "transfer-"  # participants a warm transfer calls in: never callers
_DTMF_GAP = 0.3  # seconds between two tones (as livekit's own send_dtmf tool)
_PAUSE = 0.5  # a "w" in the digits
_BUSY, _NO_ANSWER = {486, 600}, {408, 480, 487}
_REASONS = {"STR_RINGING_TIMEOUT": "no-answer", "STR_REJECTED": "busy"}


@dataclass(frozen=True)
class SipAccess:
    """How to reach livekit's API: the server URL and an API key allowed SIP calls."""

    url: str
    api_key: str
    api_secret: str


def dtmf_code(digit: str) -> int:
    """livekit's DTMF code of a key: 0-9, * is 10, # is 11, A-D are 12-15."""
    if digit.isdigit():
        return int(digit)
    return {"*": 10, "#": 11}.get(digit, ord(digit) - ord("A") + 12)


class SipCallControl:
    """`CallControl` for a caller of a LiveKit room, through livekit's SIP API."""

    kind = "livekit-sip"

    def __init__(
        self,
        hub: Hub,
        desk: Desk,
        room_id: str,
        caller: Caller,
        *,
        room_name: str,
        access: SipAccess | None,
        session: Callable[[], VoiceSession | None],
        publish_dtmf: Callable[[int, str], Awaitable[None]],
        clock: Clock,
    ) -> None:
        self.hub, self.desk, self.room_id, self.caller = hub, desk, room_id, caller
        self.room_name, self.access, self.session = room_name, access, session
        self.publish_dtmf, self.clock = publish_dtmf, clock
        self.handed_over = asyncio.Event()  # the agent is off the call: stop serving it
        self.outcomes: list[str] = []
        self._jobs = TaskSet("a LiveKit SIP call's control")

    async def transfer(self, request: TransferRequest) -> str:
        target = request.target
        if self.caller.kind != "sip":
            raise CallControlError(
                "this caller is not on a phone line (a LiveKit app or browser), so there is "
                "nobody to put them through to from here."
            )
        if target.phone is None:
            raise CallControlError(f"{target.name} takes only browser callers.")
        if self.access is None:
            raise CallControlError(
                "transfers on LiveKit need LIVEKIT_URL, LIVEKIT_API_KEY and "
                "LIVEKIT_API_SECRET on the worker."
            )
        trunk = self.desk.config.transfer.sip_trunk if self.desk.config.transfer else None
        if request.mode == "warm" and trunk is None:
            raise CallControlError(
                "a warm transfer on LiveKit calls the person through an outbound trunk, and "
                "this desk names none ([transfer] sip_trunk)."
            )
        self._spawn(self._transfer(request, trunk))
        if request.mode == "cold":
            return f"I'm putting you through to {target.name} now."
        return f"Please hold while I call {target.name} for you."

    async def send_digits(self, digits: str) -> str:
        if self.caller.kind != "sip":
            raise CallControlError("this caller is not on a phone line, so it has no keypad.")
        self._spawn(self._digits(digits))
        return f"Pressing {' '.join(d for d in digits if d != 'w')}."

    async def aclose(self) -> None:
        await self._jobs.aclose()

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        self._jobs.start(job, name="call control")

    async def _after_reply(self) -> None:
        session = self.session()
        if session is not None:
            await until_agent_quiet(session.activity, self.clock)

    async def _digits(self, digits: str) -> None:
        await self._after_reply()
        for digit in digits:
            if digit == "w":
                await self.clock.sleep(_PAUSE)
                continue
            await self.publish_dtmf(dtmf_code(digit), digit)
            await self.clock.sleep(_DTMF_GAP)
        log.info("room %s: sent %d keypad tones", self.room_id, len(digits))

    async def _transfer(self, request: TransferRequest, trunk: str | None) -> None:
        with vendor_import("livekit-api", "livekit"):
            from google.protobuf.duration_pb2 import Duration
            from livekit import api
        await self._after_reply()
        target, access = request.target, self.access
        assert access is not None and target.phone is not None
        address = target.phone if target.is_sip else f"tel:{target.phone}"
        ring = Duration(seconds=round(request.ring_timeout))
        try:
            async with api.LiveKitAPI(access.url, access.api_key, access.api_secret) as lk:
                if request.mode == "cold":
                    answer = await lk.sip.transfer_sip_participant(
                        api.TransferSIPParticipantRequest(
                            room_name=self.room_name,
                            participant_identity=self.caller.identity,
                            transfer_to=address,
                            play_dialtone=False,
                            ringing_timeout=ring,
                        )
                    )
                    if answer.status != api.STS_TRANSFER_SUCCESSFUL:  # not through, no error
                        reason = api.SIPTransferReason.Name(answer.reason)
                        outcome = _REASONS.get(reason) or _outcome(answer.sip_status.code)
                        await self._not_through(request, outcome, reason)
                        return
                else:
                    text = await briefing(self.hub.store, self.desk, self.room_id, request)
                    await lk.sip.create_sip_participant(
                        api.CreateSIPParticipantRequest(
                            sip_trunk_id=trunk or "",
                            sip_call_to=target.phone,
                            room_name=self.room_name,
                            participant_identity=TRANSFER_IDENTITY + secrets.token_hex(6),
                            participant_name=target.name,
                            wait_until_answered=True,
                            ringing_timeout=ring,
                            play_dialtone=True,
                        )
                    )
                    session = self.session()
                    if session is not None:  # the introduction, in the room for both
                        with contextlib.suppress(Exception):
                            await session.say(text)
        except api.SipCallError as exc:
            await self._not_through(request, _outcome(exc.sip_status_code), str(exc))
            return
        except api.ServerError as exc:
            await self._not_through(request, "api_error", str(exc))
            return
        await self._record(request, "connected")
        self.handed_over.set()

    async def _not_through(self, request: TransferRequest, outcome: str, detail: str) -> None:
        log.info("room %s: transfer to %s: %s", self.room_id, request.target.name, detail)
        await self._record(request, outcome, detail)
        await self.hub.delivery.deliver(
            self.room_id,
            nobody_line(request.target.name, outcome),
            strategy=Immediate(),
            metadata={"kind": NOTICE_KIND},
        )

    async def _record(self, request: TransferRequest, outcome: str, detail: str = "") -> None:
        # live: the job holds the room while it serves the caller
        await record_transfer(
            self.hub, self.desk, self.room_id, request, outcome, detail=detail, live=lambda _: True
        )
        self.outcomes.append(outcome)


def _outcome(sip_status: int | None) -> str:
    if sip_status in _BUSY:
        return "busy"
    if sip_status in _NO_ANSWER:
        return "no-answer"
    return "failed"


class SipControls:
    """Makes the `SipCallControl` of each caller a desk job serves in one LiveKit room."""

    def __init__(
        self,
        *,
        room_name: str,
        access: SipAccess | None,
        publish_dtmf: Callable[[int, str], Awaitable[None]],
        clock: Clock,
    ) -> None:
        self.room_name, self.access = room_name, access
        self.publish_dtmf, self.clock = publish_dtmf, clock

    def for_caller(
        self,
        hub: Hub,
        desk: Desk,
        room_id: str,
        caller: Caller,
        session: Callable[[], VoiceSession | None],
    ) -> SipCallControl:
        return SipCallControl(
            hub,
            desk,
            room_id,
            caller,
            room_name=self.room_name,
            access=self.access,
            session=session,
            publish_dtmf=self.publish_dtmf,
            clock=self.clock,
        )
