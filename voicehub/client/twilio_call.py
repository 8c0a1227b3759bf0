"""A phone call as Twilio runs it, across media streams, from the caller's side.

    call = TwilioCall(TwilioCaller(balancer_url, public_url, auth_token), playout_speed=16)
    await call.dial("research", "+15550100")   # the voice webhook, then its TwiML
    await call.say(pcm16)                       # on whichever stream carries the call now
    ...
    await call.hang_up()

The call is one of Twilio's side (`voicehub.client.twilio_side.TwilioSide`; its TwiML runs
in `voicehub.client.twiml_call.Call`), so there is one model of Twilio's side of a call:
`<Connect><Stream>` runs until the stream's socket closes and, if the caller did not hang
up, the next verb runs: the `<Redirect>` brings the call to another instance. Without a side
given, the call has one of its own that serves no REST API; with the development tools'
account (`voicehub call --twilio-api`) the server may also move the call (transfers).
`redirect(url)` is the REST API's call update with `Url`.
"""

from __future__ import annotations

from voicehub.client.twilio import PhoneLineClient, TwilioCaller
from voicehub.client.twilio_side import TwilioSide
from voicehub.client.twiml_call import Call, StreamLeg
from voicehub.core.clock import Clock
from voicehub.errors import VoicehubError

__all__ = ["StreamLeg", "TwilioCall"]


class TwilioCall:
    """One incoming call through `caller` (Twilio's side of the account)."""

    def __init__(
        self,
        caller: TwilioCaller,
        *,
        account: TwilioSide | None = None,
        clock: Clock | None = None,
        playout_speed: float = 1.0,
    ) -> None:
        self.caller = caller
        self._owns_account = account is None
        self.account = account or TwilioSide(caller, clock=clock, playout_speed=playout_speed)
        self.clock = self.account.clock
        self._call: Call | None = None

    @property
    def call(self) -> Call:
        """The account's call (its TwiML, status and history)."""
        if self._call is None:
            raise VoicehubError("the call has not been dialled")
        return self._call

    @property
    def call_sid(self) -> str:
        return self.call.sid

    @property
    def legs(self) -> list[StreamLeg]:
        """The media streams the call ran on, in order."""
        return self.call.legs

    @property
    def line(self) -> PhoneLineClient:
        """The stream carrying the call now (the last one opened)."""
        if self._call is None or not self._call.legs:
            raise VoicehubError("the call has no media stream yet")
        return self._call.legs[-1].line

    async def dial(self, desk: str, from_: str, *, timeout: float = 30.0) -> None:
        """Ring the desk's voice webhook and run its TwiML; returns once the first stream
        is open (raises if the call ended first)."""
        params = self.caller.call_params(from_)
        call = Call(
            self.account, to=params["To"], from_=from_, direction="inbound", sid=params["CallSid"]
        )
        call.status = "ringing"
        self._call = call
        self.account.add_call(call)
        response = await self.caller.post(f"/twilio/{desk}/voice", params)
        response.raise_for_status()
        call.status = "in-progress"
        call.run(response.text)
        await self.wait_for_stream(0, timeout)

    async def wait_for_stream(self, count: int, timeout: float = 30.0) -> PhoneLineClient:
        """Until more than `count` streams were opened; the last one."""
        call = self.call
        await self.account.wait_for(lambda: len(call.legs) > count or call.ended.is_set(), timeout)
        if len(call.legs) <= count:
            raise VoicehubError(f"the call ended ({call.status}) before stream {count + 1}")
        return self.line

    async def say(self, pcm16: bytes, sample_rate: int = 16000) -> None:
        """The caller speaks (on whichever stream carries the call while they do)."""
        await self.line.say(pcm16, sample_rate)

    async def hang_up(self) -> None:
        """The caller hangs up: `stop` on the live stream, and the call is over."""
        if self._call is not None:
            await self._call.end()
        if self._owns_account:
            await self.account.end_calls()

    async def redirect(self, url: str) -> None:
        """The REST API's call update: leave the current verb, run the TwiML at `url`."""
        await self.account.redirect(self.call, url)

    async def aclose(self) -> None:
        await self.hang_up()
