"""A phone call as Twilio runs it, across media streams: the TwiML, verb after verb.

    call = TwilioCall(TwilioCaller(balancer_url, public_url, auth_token), playout_speed=16)
    await call.dial("research", "+15550100")   # the voice webhook, then its TwiML
    await call.say(pcm16)                       # on whichever stream carries the call now
    ...
    await call.hang_up()

Twilio runs `<Connect><Stream>` until the stream's socket closes; if the caller did not hang
up it runs the next verb: `<Redirect>` (it posts the call's parameters to the URL and runs
the TwiML answered), `<Hangup>` or `<Reject>` (the call ends), `<Say>` (spoken: here,
recorded). A call with no verb left ends. `redirect(url)` is the REST API's call update:
Twilio leaves the verb it runs and runs the TwiML at `url`. The caller's words not yet sent
and the agent's audio played carry over from one stream (`legs`) to the next, as on a phone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from voicehub.client.twilio import PhoneLineClient, TwilioCaller, parse_twiml
from voicehub.core.clock import Clock, SystemClock
from voicehub.errors import ProtocolError, VoicehubError

__all__ = ["StreamLeg", "TwilioCall"]

log = logging.getLogger("voicehub.client")


@dataclass
class StreamLeg:
    """One media stream of the call: when it opened and closed (clock time)."""

    line: PhoneLineClient
    opened_at: float
    closed_at: float | None = None


class TwilioCall:
    """One call through `caller` (Twilio's side of the account)."""

    def __init__(
        self, caller: TwilioCaller, *, clock: Clock | None = None, playout_speed: float = 1.0
    ) -> None:
        self.caller = caller
        self.clock = clock or SystemClock()
        self.playout_speed = playout_speed
        self.legs: list[StreamLeg] = []
        self.said: list[str] = []  # what <Say> verbs said
        self.ended = asyncio.Event()
        self.end_reason = ""
        self.call_sid = ""
        self._params: dict[str, str] = {}
        self._redirect: str | None = None
        self._redirected = asyncio.Event()
        self._new_leg = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._hung_up = False

    @property
    def line(self) -> PhoneLineClient:
        """The stream carrying the call now (the last one opened)."""
        if not self.legs:
            raise VoicehubError("the call has no media stream yet")
        return self.legs[-1].line

    async def dial(self, desk: str, from_: str, *, timeout: float = 30.0) -> None:
        """Ring the desk's voice webhook and run its TwiML; returns once the first stream
        is open (raises if the call ended first)."""
        self._params = self.caller.call_params(from_)
        self.call_sid = self._params["CallSid"]
        response = await self.caller.post(f"/twilio/{desk}/voice", self._params)
        response.raise_for_status()
        self._runner = asyncio.create_task(self._run(response.text))
        await self.wait_for_stream(0, timeout)

    async def wait_for_stream(self, count: int, timeout: float = 30.0) -> PhoneLineClient:
        """Until more than `count` streams were opened; the last one."""

        async def until() -> None:
            while len(self.legs) <= count and not self.ended.is_set():
                self._new_leg.clear()
                ended = asyncio.ensure_future(self.ended.wait())
                opened = asyncio.ensure_future(self._new_leg.wait())
                try:
                    await asyncio.wait({ended, opened}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    ended.cancel()
                    opened.cancel()

        await asyncio.wait_for(until(), timeout)
        if len(self.legs) <= count:
            raise VoicehubError(f"the call ended ({self.end_reason}) before stream {count + 1}")
        return self.line

    async def say(self, pcm16: bytes, sample_rate: int = 16000) -> None:
        """The caller speaks (on whichever stream carries the call while they do)."""
        await self.line.say(pcm16, sample_rate)

    async def hang_up(self) -> None:
        """The caller hangs up: `stop` on the stream, and the call is over."""
        self._hung_up = True
        if self.legs:
            await self.line.hang_up()
        await self._finish("the caller hung up")

    async def redirect(self, url: str) -> None:
        """The REST API's call update: leave the current verb, run the TwiML at `url`."""
        self._redirect = url
        self._redirected.set()

    async def aclose(self) -> None:
        if not self.ended.is_set():
            await self.hang_up()

    # -- running the TwiML -----------------------------------------------------------------

    async def _run(self, twiml: str) -> None:
        document: str | None = twiml
        try:
            while document is not None and not self._hung_up:
                document = await self._run_once(document)
        except Exception as exc:
            log.warning("call %s: TwiML run failed: %r", self.call_sid, exc)
            self.end_reason = f"failed: {exc!r}"
        finally:
            if not self.ended.is_set():
                await self._finish(self.end_reason or "no TwiML left")

    async def _run_once(self, twiml: str) -> str | None:
        """Run one TwiML document; the next one to run (a redirect), or None: the end."""
        try:
            root = ET.fromstring(twiml)
        except ET.ParseError as exc:
            raise ProtocolError(f"the TwiML is not XML ({exc}): {twiml[:80]!r}") from None
        for verb in root:
            if verb.tag == "Connect":
                await self._stream(twiml)
                if self._hung_up:
                    return None
            elif verb.tag == "Redirect":
                return await self._fetch((verb.text or "").strip())
            elif verb.tag in ("Hangup", "Reject"):
                self.end_reason = verb.tag.lower()
                return None
            elif verb.tag == "Say":
                self.said.append(verb.text or "")
            if self._redirect is not None:
                url, self._redirect = self._redirect, None
                return await self._fetch(url)
        return None

    async def _fetch(self, url: str) -> str:
        params = {**self._params, "CallStatus": "in-progress"}
        response = await self.caller.post_to(url, params)
        response.raise_for_status()
        return response.text

    async def _stream(self, twiml: str) -> None:
        """`<Connect><Stream>`: open it and wait until its socket closes (or a redirect)."""
        answer = parse_twiml(twiml, self.call_sid)
        line = PhoneLineClient(
            self.caller.local(answer.url, scheme="ws"),
            answer,
            account_sid=self.caller.account_sid,
            clock=self.clock,
            playout_speed=self.playout_speed,
        )
        if self.legs:
            line.carry_over(self.legs[-1].line)
        await line.open()
        leg = StreamLeg(line, self.clock.now())
        self.legs.append(leg)
        self._new_leg.set()
        self._redirected.clear()
        closed = asyncio.ensure_future(line.closed.wait())
        redirected = asyncio.ensure_future(self._redirected.wait())
        try:
            await asyncio.wait({closed, redirected}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            redirected.cancel()
        if not line.closed.is_set():  # a REST redirect: Twilio drops the stream
            await line.close()
        leg.closed_at = self.clock.now()

    async def _finish(self, reason: str) -> None:
        self.end_reason = self.end_reason or reason
        self.ended.set()
        runner = self._runner
        if runner is not None and runner is not asyncio.current_task():
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        for leg in self.legs:
            if not leg.line.closed.is_set():
                await leg.line.close()
