"""Taking up a phone call no instance carries, through its carrier's REST API.

Normally the carrier brings a call back by itself: when its media stream's socket closes
without a hang-up it runs the answer's `<Redirect>` (Twilio, see
`voicehub.telephony.twilio.webhooks`; Telnyx and Plivo the same). Two cases need a push,
each answered by redirecting the live call with the REST API to the voice webhook with
`resume=1` (`CallRedirector`: Twilio's and Telnyx's call update `Url`, Plivo's transfer of
the caller's leg), after which the carrier drops what it was doing and fetches it:

- a Twilio stream ended (its status callback says `stream-stopped` or `stream-error`) and,
  `grace` seconds later, it is still the stream the call record names: no redirect came;
- an instance was lost (its heartbeat expired) with calls still recorded as its own: the
  machine died without closing their streams, so the carrier did not notice.

Vonage has no redirect (`docs/carriers.md`): its calls are not taken up here.

Of several instances acting at once, one redirects: the call record is claimed first
(compare-and-set), and the instance the call reaches then takes it up as a failover.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from voicehub.core.jobs import TaskSet
from voicehub.core.store.base import CallRecord, CallState
from voicehub.core.trusted import replace

if TYPE_CHECKING:
    from voicehub.core.clock import Clock
    from voicehub.core.store.base import Store

__all__ = ["CallRedirector", "PhoneTakeover"]

log = logging.getLogger("voicehub.twilio")

REDIRECT_GRACE = 5.0
"""Seconds Twilio gets to run the TwiML's `<Redirect>` after a stream ended, before the
call is redirected through the REST API (a redirect takes well under a second)."""


class CallRedirector(Protocol):
    """Makes a live call fetch new instructions from `url` (Twilio's call update: the
    server's `voicehub.telephony.twilio.rest.TwilioRest`; Telnyx's and Plivo's
    `take_up`)."""

    async def redirect_to(self, call_sid: str, url: str) -> None:
        """Raises when the API refuses (the call is over, say)."""
        ...


class PhoneTakeover:
    """Redirects calls nobody carries to their carrier's voice webhook at
    `voice_url(carrier, desk)`, through `redirectors[carrier]`.

    `owner` is this instance (it claims a call record before redirecting it); `clock` times
    the grace (virtual in tests)."""

    def __init__(
        self,
        store: Store,
        owner: str,
        redirectors: Mapping[str, CallRedirector],
        voice_url: Callable[[str, str], str],
        clock: Clock,
        *,
        wall: Callable[[], float],
        grace: float = REDIRECT_GRACE,
    ) -> None:
        self.store = store
        self.owner = owner
        self.redirectors = dict(redirectors)  # the carriers set up after this one join later
        self.voice_url = voice_url
        self.clock = clock
        self.wall = wall
        self.grace = grace
        self.redirected: list[str] = []  # call sids, in order
        self._jobs = TaskSet("phone take-over")

    def stream_ended(self, desk: str, conversation: str, call_sid: str, stream_sid: str) -> None:
        """A stream of the call ended (its status callback): follow it up in `grace` s."""
        self._jobs.start(self._follow_up(f"{desk}:{conversation}", stream_sid), name="follow-up")

    async def instance_lost(self, instance_id: str) -> None:
        """`instance_id` was lost (heartbeat sweep): take up its phone calls on carriers
        this instance can redirect."""
        for record in await self.store.list_calls(owner=instance_id):
            if record.transport in self.redirectors:
                await self.take_up(record)

    async def take_up(self, record: CallRecord) -> bool:
        """Claim `record`'s call and redirect it to the voice webhook; False if another
        instance changed the record first (or its carrier cannot be redirected from here).
        A call the carrier says is over is recorded ended."""
        redirector = self.redirectors.get(record.transport)
        if redirector is None:
            return False
        claimed = replace(
            record,
            owner=self.owner,
            fence=record.fence + 1,
            updated_at=self.wall(),
            line={**record.line, "redirected_by": self.owner},
        )
        if not await self.store.swap_call(claimed, expected_fence=record.fence):
            return False
        call_sid = record.line.get("call_sid", "")
        try:
            await redirector.redirect_to(call_sid, self.voice_url(record.transport, record.desk))
        except Exception as exc:
            log.info("call %s could not be redirected (%r): recorded ended", call_sid, exc)
            ended = replace(claimed, state=CallState.ENDED, fence=claimed.fence + 1)
            await self.store.swap_call(ended, expected_fence=claimed.fence)
            return True
        self.redirected.append(call_sid)
        log.info("call %s (room %s) redirected to take it up", call_sid, record.room_id)
        return True

    async def wait(self) -> None:
        """Until the follow-ups started so far are done (tests)."""
        await self._jobs.wait()

    async def aclose(self) -> None:
        await self._jobs.aclose()

    async def _follow_up(self, room_id: str, stream_sid: str) -> None:
        try:
            await self.clock.sleep(self.grace)
            record = await self.store.get_call(room_id)
            if record is None or not record.state.open:
                return  # hung up, or ended on purpose
            if record.line.get("stream_sid") != stream_sid:
                return  # a newer stream carries it: the redirect came
            await self.take_up(record)
        except Exception:
            log.exception("room %s: could not follow up its ended stream", room_id)
